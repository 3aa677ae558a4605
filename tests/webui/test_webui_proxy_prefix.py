"""Behind a proxy that mounts the console under a prefix (SCRIPT_NAME, or X-Forwarded-Prefix with
LOWKIQ_WEB_PROXIES), every action returns to the same tab with its filter, sort and page kept."""

from __future__ import annotations

import base64
import html
import re

import pytest
from webui_support import OrdersWorker, host_app, make_dead

from lowkiq.webui import create_app

# A console on a public host needs a password (else it refuses every request).
AUTH = {"Authorization": "Basic " + base64.b64encode(b"admin:s3cret").decode()}
FORWARDED = {"X-Forwarded-Prefix": "/ops/jobs", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "ops.example.com",
             **AUTH}


def next_of(page: str, form_id: str = "selection") -> str:
    form = page.split(f'id="{form_id}"')[1]
    return html.unescape(re.search(r'name="next" value="([^"]+)"', form).group(1))


def token_of(page: str) -> str:
    return re.search(r'name="csrf_token" value="([0-9a-f]+)"', page).group(1)


def test_x_forwarded_prefix_is_followed_when_a_proxy_is_declared(redis_url, runtime):
    make_dead(runtime, OrdersWorker, [{"id": f"job-{i}"} for i in range(6)])
    client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_PROXIES": "1",
                                 "LOWKIQ_WEB_PASSWORD": "s3cret"}).test_client()
    listing = "/workers/OrdersWorker/morgue?order_by=id&min=job-2&limit=50"
    reply = client.get(listing, headers=FORWARDED)
    page = reply.get_data(as_text=True)
    cookies = reply.headers.getlist("Set-Cookie")
    assert cookies and all("Path=/ops/jobs/" in c for c in cookies)  # the path the browser sees
    for cookie in cookies:  # the test client asked for /workers/...: send them back as the browser would
        name, _, rest = cookie.partition("=")
        client.set_cookie(name, rest.split(";")[0], domain="localhost", path="/")
    hrefs = re.findall(r'(?:href|action|formaction)="(/[^"]*)"', page)
    assert hrefs and all(h.startswith("/ops/jobs/") for h in hrefs), [h for h in hrefs if not h.startswith("/ops/")]
    back = next_of(page)
    assert back == "/ops/jobs" + listing

    headers = {**FORWARDED, "Origin": "https://ops.example.com"}
    done = client.post("/workers/OrdersWorker/morgue/requeue", headers=headers,
                       data={"csrf_token": token_of(page), "ids": ["job-2"], "next": back})
    assert done.status_code == 303, done.get_data(as_text=True)
    assert done.headers["Location"] == back
    form = {"csrf_token": token_of(page), "next": next_of(page, "matching"), "order_by": "id", "min": "job-4"}
    asked = client.post("/workers/OrdersWorker/morgue/delete_matching", headers=headers, data=form)
    assert asked.status_code == 200, asked.get_data(as_text=True)
    confirming = asked.get_data(as_text=True)
    assert 'action="/ops/jobs/workers/OrdersWorker/morgue/delete_matching"' in confirming
    assert next_of(confirming, "confirm-form") == back
    confirm = re.search(r'name="confirm" value="([^"]+)"', confirming).group(1)
    matching = client.post("/workers/OrdersWorker/morgue/delete_matching", headers=headers,
                           data={**form, "confirm": confirm})
    assert matching.status_code == 303, matching.get_data(as_text=True)
    assert matching.headers["Location"] == back
    assert sorted(j.id for j in runtime.queries(OrdersWorker).morgue(order_by="id").rows) == ["job-0", "job-1", "job-3"]


def test_without_a_declared_proxy_the_headers_are_ignored(redis_url, runtime):
    OrdersWorker.perform_async([{"id": "1"}])
    client = create_app(environ={"LOWKIQ_REDIS_URL": redis_url, "LOWKIQ_WEB_PASSWORD": "s3cret"}).test_client()
    page = client.get("/workers/OrdersWorker/enqueued", headers=FORWARDED).get_data(as_text=True)
    assert "/ops/jobs" not in page


def test_selected_actions_keep_the_script_name_prefix_the_filter_and_the_tab(runtime):
    OrdersWorker.perform_async([{"id": f"q{i}"} for i in range(5)])
    client = host_app("/lowkiq").test_client()
    behind = {"base_url": "http://localhost/proxy/"}
    listing = "/lowkiq/workers/OrdersWorker/enqueued?order_by=id&desc=1&limit=25"
    page = client.get(listing, **behind).get_data(as_text=True)
    back = next_of(page)
    assert back == "/proxy" + listing
    done = client.post("/lowkiq/workers/OrdersWorker/enqueued/delete",
                       data={"csrf_token": token_of(page), "ids": ["q1"], "next": back}, **behind)
    assert (done.status_code, done.headers["Location"]) == (303, back)
    assert runtime.queries(OrdersWorker).job("q1") is None


@pytest.mark.parametrize("action", ["perform_all_now", "kill_failed", "delete_failed"])
def test_the_worker_s_header_actions_return_to_the_tab_filter_and_page_they_were_pressed_on(runtime, action):
    make_dead(runtime, OrdersWorker, [{"id": f"d{i}"} for i in range(3)])
    client = host_app("/lowkiq").test_client()
    behind = {"base_url": "http://localhost/proxy/"}
    listing = "/lowkiq/workers/OrdersWorker/morgue?order_by=id&min=d1&max=d2&limit=25"
    page = client.get(listing, **behind).get_data(as_text=True)
    form = page.split(f'/workers/OrdersWorker/{action}"')[1].split("</form>")[0]
    back = html.unescape(re.search(r'name="next" value="([^"]+)"', form).group(1))
    assert back == "/proxy" + listing
    done = client.post(f"/lowkiq/workers/OrdersWorker/{action}", data={"csrf_token": token_of(page), "next": back},
                       **behind)
    assert (done.status_code, done.headers["Location"]) == (303, back)


def test_a_dead_job_deleted_from_its_page_returns_to_the_dead_tab(runtime):
    make_dead(runtime, OrdersWorker, [{"id": "d1"}])
    client = host_app("/lowkiq").test_client()
    page = client.get("/lowkiq/workers/OrdersWorker/job?id=d1").get_data(as_text=True)
    form = page.split('/workers/OrdersWorker/morgue/delete"')[1].split("</form>")[0]
    back = html.unescape(re.search(r'name="next" value="([^"]+)"', form).group(1))
    done = client.post("/lowkiq/workers/OrdersWorker/morgue/delete",
                       data={"csrf_token": token_of(page), "ids": ["d1"], "next": back})
    assert (done.status_code, done.headers["Location"]) == (303, "/lowkiq/workers/OrdersWorker/morgue")


def test_only_the_page_shown_is_highlighted_in_the_menu(runtime):
    client = host_app("/lowkiq").test_client()
    for path, active in (("/lowkiq/", "Dashboard"), ("/lowkiq/servers", "Servers"), ("/lowkiq/audit", "Audit"),
                         ("/lowkiq/search?id=nothing", None)):
        menu = client.get(path).get_data(as_text=True).split('class="mainnav"')[1].split("</nav>")[0]
        assert re.findall(r'class="active"[^>]*>([^<]+)<', menu) == ([active] if active else []), path
