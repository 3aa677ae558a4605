"""Tags in the console (docs/tags.md): the enqueued and dead tabs' tag filter, its exact-count bulk actions,
the job page's tags, and the JSON API's listings and actions by tag; every tag escaped."""

from __future__ import annotations

import json
import re

from webui_support import XSS, MailerWorker, OrdersWorker, counts, csrf, ids_in, make_dead, matching

from lowkiq.store import audit

W = "/lowkiq/workers/OrdersWorker"
API = "/lowkiq/api/v1/workers/OrdersWorker"


def test_the_enqueued_tab_filtered_by_a_tag_lists_the_queued_ids_that_carry_it(client, runtime):
    OrdersWorker.perform_async([{"id": f"v{i}", "tags": ["vip"]} for i in range(5)] + [{"id": "plain"}]
                               + [{"id": "other", "tags": ["acct-7"]}])
    MailerWorker.perform_async([{"id": "m", "tags": ["vip"]}])  # another worker's
    page = client.get(W + "/enqueued?tag=vip")
    assert page.status_code == 200
    assert sorted(ids_in(page.data)) == [f"v{i}" for i in range(5)]
    text = page.get_data(as_text=True)
    assert "5 jobs tagged <code>vip</code> on this page" in text
    assert "Delete matching</button>" in text and 'id="export"' not in text  # counted on confirming, not here
    assert 'name="tag" value="vip"' in text


def test_a_tag_filter_pages_forwards_each_id_once(client, runtime):
    OrdersWorker.perform_async([{"id": f"v{i:02}", "tags": ["vip"]} for i in range(23)])
    seen, url = [], W + "/enqueued?tag=vip&limit=10"
    while url:
        page = client.get(url)
        seen += ids_in(page.data)
        found = re.search(r'id="tag-next" href="([^"]+)"', page.get_data(as_text=True))
        url = found.group(1).replace("&amp;", "&") if found else None
    assert sorted(seen) == [f"v{i:02}" for i in range(23)] and len(seen) == 23


def test_the_dead_tab_filtered_by_a_tag_and_requeue_matching(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": f"d{i}", "tags": ["vip"] if i < 3 else ["no"]} for i in range(5)])
    listing = W + "/morgue?tag=vip"
    assert sorted(ids_in(client.get(listing).data)) == ["d0", "d1", "d2"]
    asked, done = matching(client, f"{W}/morgue/requeue_matching", listing, tag="vip")
    assert "3 dead jobs" in asked and "tagged &#39;vip&#39;" in asked
    assert done.status_code == 303
    assert counts(runtime, OrdersWorker) == (3, 2)
    entry, _ = audit.read(runtime.client)
    assert (entry.action, entry.count, entry.scope) == ("morgue/requeue_matching", 3, "tagged 'vip'")


def test_delete_matching_a_tag_acts_on_exactly_the_ids_counted(client, runtime):
    OrdersWorker.perform_async([{"id": f"v{i}", "tags": ["vip"]} for i in range(4)] + [{"id": "plain"}])
    listing = W + "/enqueued?tag=vip"
    token = csrf(client, listing)
    action = f"{W}/enqueued/delete_matching"
    asked = client.post(action, data={"csrf_token": token, "next": listing, "tag": "vip"})
    assert "Delete 4 queued jobs for good?" in asked.get_data(as_text=True)
    confirm = re.search(rb'name="confirm" value="([^"]+)"', asked.data).group(1).decode()
    # after the count: a new tagged id (not counted), and a counted id that comes back without the tag
    OrdersWorker.perform_async([{"id": "late", "tags": ["vip"]}])
    runtime.actions(OrdersWorker).delete(["v0"])
    OrdersWorker.perform_async([{"id": "v0"}])
    done = client.post(action, data={"csrf_token": token, "next": listing, "tag": "vip", "confirm": confirm})
    assert done.status_code == 303
    q = runtime.queries(OrdersWorker)
    assert [q.job(i) is not None for i in ("v0", "v1", "v2", "v3", "late", "plain")] == [
        True, False, False, False, True, True]
    flash = client.get(listing).get_data(as_text=True)
    assert "Deleted 3 queued jobs (tagged &#39;vip&#39;). 1 of the 4 counted no longer matched" in flash


def test_a_confirmation_counted_for_a_tag_confirms_no_other_filter(client, runtime):
    OrdersWorker.perform_async([{"id": "v", "tags": ["vip"]}, {"id": "w", "tags": ["other"]}])
    listing = W + "/enqueued?tag=vip"
    token = csrf(client, listing)
    action = f"{W}/enqueued/delete_matching"
    asked = client.post(action, data={"csrf_token": token, "next": listing, "tag": "vip"})
    confirm = re.search(rb'name="confirm" value="([^"]+)"', asked.data).group(1).decode()
    client.post(action, data={"csrf_token": token, "next": listing, "tag": "other", "confirm": confirm})
    assert counts(runtime, OrdersWorker) == (2, 0)  # refused: nothing done
    assert "Nothing done" in client.get(listing).get_data(as_text=True)


def test_a_tag_filter_refuses_other_filters_and_bad_tags(client, runtime):
    assert client.get(W + "/enqueued?tag=vip&min=a").status_code == 400
    assert client.get(W + "/enqueued?tag=vip&payload=x").status_code == 400
    assert client.get(W + "/enqueued?tag=" + "x" * 65).status_code == 400
    assert client.get(W + "/enqueued?tag_after=0:").status_code == 400
    assert client.get(W + "/enqueued?tag=vip&tag_after=nope").status_code == 400


def test_the_job_page_and_its_history_show_the_tags_escaped(client, runtime):
    OrdersWorker.perform_async([{"id": "a", "tags": [XSS, "vip"]}])
    page = client.get(W + "/job?id=a").get_data(as_text=True)
    assert XSS not in page
    tags = page[page.index('id="job-tags"'):page.index("</p>", page.index('id="job-tags"'))]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in tags and "vip" in tags
    assert "/enqueued?tag=vip" in tags
    assert "tagged &lt;script&gt;alert(1)&lt;/script&gt;, vip" in page  # the push entry of its history
    listing = client.get(W + "/enqueued", query_string={"tag": XSS}).get_data(as_text=True)
    assert XSS not in listing and ids_in(listing.encode()) == ["a"]
    assert client.get(API + "/jobs/a").get_json()["tags"] == [XSS, "vip"]


def test_the_api_lists_and_acts_on_a_tag(client, runtime):
    from openapi_support import Spec

    spec = Spec(client.get("/lowkiq/api/v1/openapi.json").get_json())
    OrdersWorker.perform_async([{"id": f"v{i}", "tags": ["vip"]} for i in range(3)] + [{"id": "plain"}])
    listing = "/api/v1/workers/{worker}/enqueued"
    listed = spec.check(client.get(API + "/enqueued", query_string={"tag": "vip", "limit": "2"}), listing)
    seen = [job["id"] for job in listed["jobs"]]
    while listed["tagged"]["continue"]:
        listed = spec.check(client.get(API + "/enqueued", query_string={
            "tag": "vip", "limit": "2", "tag_after": listed["tagged"]["continue"]}), listing)
        seen += [job["id"] for job in listed["jobs"]]
    assert sorted(seen) == ["v0", "v1", "v2"]
    path = API + "/enqueued/matching"
    spec.check_body({"action": "delete", "tag": "vip", "dry_run": True}, "/api/v1/workers/{worker}/enqueued/matching")
    dry = client.post(path, data=json.dumps({"action": "delete", "tag": "vip", "dry_run": True}),
                      content_type="application/json").get_json()
    assert dry["count"] == 3
    done = client.post(path, data=json.dumps({"action": "delete", "tag": "vip", "confirm": dry["confirm"]}),
                       content_type="application/json").get_json()
    assert done == {"touched": 3, "counted": 3, "skipped": 0}
    assert counts(runtime, OrdersWorker) == (1, 0)
    bad = client.post(path, data=json.dumps({"action": "delete", "tag": 7, "dry_run": True}),
                      content_type="application/json")
    assert bad.status_code == 400 and '"tag"' in bad.get_json()["error"]
