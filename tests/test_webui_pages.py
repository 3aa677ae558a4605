"""Every page of the console, rendered by a host app with the blueprint at /lowkiq."""

from __future__ import annotations

import re

from queue_support import held_lease
from webui_support import XSS, MailerWorker, OrdersWorker, counts, csrf, fail, ids_in, make_dead

W = "/lowkiq/workers/OrdersWorker"


def test_dashboard_shows_totals_a_row_per_worker_and_redis(client, runtime):
    OrdersWorker.perform_async([{"id": i} for i in range(7)])
    MailerWorker.perform_async([{"id": "a"}, {"id": "b"}])
    fail(runtime, OrdersWorker, ["1"])
    page = client.get("/lowkiq/")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    enqueued = re.search(r'data-total="enqueued">([^<]+)<', html).group(1)
    assert enqueued == "9"
    assert 'data-worker="OrdersWorker"' in html and 'data-worker="MailerWorker"' in html
    assert "queue mailer" in html  # a queue_name differing from the class name is shown
    assert "Version" in html and runtime.client.info()["redis_version"] in html
    # live refresh: the fragment polls itself
    assert 'hx-get="/lowkiq/_live"' in html and 'hx-trigger="every 3.0s"' in html
    assert 'id="live-toggle"' in html


def test_live_fragment_is_only_the_polled_part_and_follows_the_numbers(client):
    first = client.get("/lowkiq/_live").get_data(as_text=True)
    assert first.lstrip().startswith("<div id=\"live\"") and "<html" not in first
    assert 'data-total="enqueued">0<' in first
    OrdersWorker.perform_async([{"id": i} for i in range(3)])
    assert 'data-total="enqueued">3<' in client.get("/lowkiq/_live").get_data(as_text=True)


def test_chart_draws_rates_between_samples(client, runtime, clock):
    client.get("/lowkiq/_live")
    OrdersWorker.perform_async([{"id": i} for i in range(4)])
    q = runtime.queue(OrdersWorker)
    for shard in range(4):
        taken = q.ack_and_take(None, (held_lease(q, shard), 10))
        q.ack_and_take((held_lease(q, shard), [j.id for j in taken.jobs]), None)
    clock.advance(2)
    html = client.get("/lowkiq/_live").get_data(as_text=True)
    assert '<polyline class="line-processed"' in html
    assert "processed 2.0/s" in html  # 4 jobs in 2 s


def test_worker_root_redirects_to_enqueued(client):
    page = client.get(W)
    assert page.status_code == 302 and page.headers["Location"].endswith(W + "/enqueued")


def test_enqueued_sorts_filters_and_pages_by_cursor(client, runtime, clock):
    now = clock()
    OrdersWorker.perform_async([{"id": f"j{i:02d}", "payload": i, "perform_in": now + 100 - i} for i in range(30)])
    page1 = client.get(W + "/enqueued?order_by=id&desc=0&limit=25")
    assert ids_in(page1.data) == [f"j{i:02d}" for i in range(25)]
    nxt = re.search(rb'rel="next" href="([^"]+)"', page1.data).group(1).decode().replace("&amp;", "&")
    page2 = client.get(nxt)
    assert ids_in(page2.data) == [f"j{i:02d}" for i in range(25, 30)]
    assert b'rel="next"' not in page2.data
    prev = re.search(rb'rel="prev" href="([^"]+)"', page2.data).group(1).decode().replace("&amp;", "&")
    assert ids_in(client.get(prev).data) == [f"j{i:02d}" for i in range(25)]
    # perform_in ascending: the highest i runs first
    by_time = client.get(W + "/enqueued?order_by=perform_in&limit=25")
    assert ids_in(by_time.data)[:2] == ["j29", "j28"]
    desc = client.get(W + "/enqueued?order_by=id&desc=1&limit=25")
    assert ids_in(desc.data)[:2] == ["j29", "j28"]
    filtered = client.get(W + "/enqueued?order_by=id&min=j10&max=j12")
    assert ids_in(filtered.data) == ["j10", "j11", "j12"]


def test_enqueued_sorts_by_retry_count(client, runtime):
    OrdersWorker.perform_async([{"id": "x"}])
    fail(runtime, OrdersWorker, ["x"])
    OrdersWorker.perform_async([{"id": "y"}, {"id": "z"}])
    html = client.get(W + "/enqueued?order_by=retry_count&desc=1").data
    assert ids_in(html)[0] == "x"
    assert ids_in(client.get(W + "/enqueued?order_by=retry_count&min=0").data) == ["x"]


def test_enqueued_time_filter_accepts_a_date(client, clock):
    OrdersWorker.perform_async([{"id": "soon", "perform_in": clock() + 10}, {"id": "later", "perform_in": clock() + 7200}])
    from datetime import datetime

    cut = datetime.fromtimestamp(clock() + 3600).strftime("%Y-%m-%d %H:%M")
    assert ids_in(client.get(W + f"/enqueued?order_by=perform_in&min={cut}").data) == ["later"]


def test_bad_listing_parameters_are_400_saying_why(client):
    for query, words in [
        ("order_by=payload", b"order_by must be one of"),
        ("limit=0", b"limit must be in 1..1000"),
        ("desc=maybe", b"desc must be 0 or 1"),
        ("order_by=perform_in&min=soon", b"min must be a unix time"),
        ("after=garbage", b"malformed cursor"),
    ]:
        page = client.get(W + "/enqueued?" + query)
        assert page.status_code == 400, query
        assert words in page.data, query


def test_morgue_sorts_by_id_and_updated_at_and_pages(client, runtime, clock):
    make_dead(runtime, OrdersWorker, [{"id": f"d{i:02d}"} for i in range(10)])
    clock.advance(5)
    make_dead(runtime, OrdersWorker, [{"id": "a-late"}])
    assert ids_in(client.get(W + "/morgue?order_by=id&limit=25").data)[:2] == ["a-late", "d00"]
    by_time = ids_in(client.get(W + "/morgue?order_by=updated_at&desc=1").data)
    assert by_time[0] == "a-late" and len(by_time) == 11
    page1 = client.get(W + "/morgue?order_by=id&limit=4")
    assert ids_in(page1.data) == ["a-late", "d00", "d01", "d02"]
    assert b"Requeue all" in page1.data and b"Delete all" in page1.data
    filtered = ids_in(client.get(W + "/morgue?order_by=id&min=d05&max=d06").data)
    assert filtered == ["d05", "d06"]


def test_worker_counts_fragment(client, runtime):
    OrdersWorker.perform_async([{"id": 1}, {"id": 2}])
    html = client.get(W + "/_counts?tab=morgue").get_data(as_text=True)
    assert 'data-count="enqueued">2<' in html and 'data-count="dead">0<' in html
    assert 'class="active">Dead' in html


def test_busy_lists_jobs_in_processing(client, runtime):
    OrdersWorker.perform_async([{"id": "working", "payload": {"k": "v"}}])
    q = runtime.queue(OrdersWorker)
    q.ack_and_take(None, (held_lease(q, q.shard_of("working")), 10))
    html = client.get(W + "/busy").get_data(as_text=True)
    assert ">working</a>" in html and "&#34;k&#34;:&#34;v&#34;" in html
    assert "Nothing is being processed" in client.get("/lowkiq/workers/MailerWorker/busy").get_data(as_text=True)


def test_job_detail_shows_every_payload_score_error_and_times(client, runtime, clock):
    OrdersWorker.perform_async([{"id": "42", "payload": "v1", "score": 1.5}, {"id": "42", "payload": "v2", "score": 2.5}])
    fail(runtime, OrdersWorker, ["42"], error=b"it broke")
    html = client.get(W + "/jobs/42").get_data(as_text=True)
    assert 'id="job-queued"' in html and 'id="job-morgue"' not in html
    assert "v1" in html and "v2" in html and "1.5" in html and "2.5" in html
    assert "it broke" in html
    assert "Retry count</th><td>0" in html
    assert repr(clock() + 60) in html  # perform_in raw
    assert "in 1 min" in html  # and relative


def test_job_detail_of_a_dead_and_a_busy_job(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": "dead/one", "payload": "p"}], error=b"fatal")
    html = client.get(W + "/jobs/dead/one").get_data(as_text=True)  # ids may hold slashes
    assert 'id="job-morgue"' in html and "fatal" in html and "Requeue" in html
    OrdersWorker.perform_async([{"id": "b"}])
    q = runtime.queue(OrdersWorker)
    q.ack_and_take(None, (held_lease(q, q.shard_of("b")), 10))
    assert 'id="job-busy"' in client.get(W + "/jobs/b").get_data(as_text=True)


def test_unknown_job_is_404_page(client):
    page = client.get(W + "/jobs/nope")
    assert page.status_code == 404 and b"No job with this id" in page.data


def test_unknown_worker_is_404_page(client):
    for path in ("/enqueued", "/morgue", "/busy", "/jobs/1", ""):
        page = client.get("/lowkiq/workers/Ghost" + path)
        assert page.status_code == 404, path
        assert b"unknown worker" in page.data


def test_payloads_and_errors_are_escaped_everywhere(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": XSS, "payload": XSS}], error=XSS.encode())
    OrdersWorker.perform_async([{"id": "q", "payload": {"html": XSS}}])
    fail(runtime, OrdersWorker, ["q"], error=XSS.encode())
    from urllib.parse import quote

    for path in ("/morgue", "/enqueued", "/jobs/" + quote(XSS, safe=""), "/jobs/q"):
        html = client.get(W + path).get_data(as_text=True)
        assert XSS not in html, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, path


def test_long_payloads_are_collapsed(client):
    OrdersWorker.perform_async([{"id": "big", "payload": {"text": "x" * 5000}}, {"id": "small", "payload": {"a": 1}}])
    html = client.get(W + "/enqueued?order_by=id").get_data(as_text=True)
    assert html.count('<details class="payload">') == 1
    assert '<code class="payload">{&#34;a&#34;:1}</code>' in html


def test_requeue_selected_redirects_back_with_a_flash(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": i} for i in range(5)])
    listing = W + "/morgue?order_by=id&desc=0&limit=25"
    token = csrf(client, listing)
    done = client.post(W + "/morgue/requeue", data={"csrf_token": token, "ids": ["0", "1"], "next": listing})
    assert done.status_code == 303 and done.headers["Location"] == listing
    assert counts(runtime, OrdersWorker) == (2, 3)
    page = client.get(listing)
    assert b"Requeued 2 jobs from the morgue." in page.data
    assert ids_in(page.data) == ["2", "3", "4"]
    assert b"Requeued 2 jobs" not in client.get(listing).data  # a flash shows once


def test_every_form_action_reports_its_count(client, runtime, clock):
    cases = [
        ("morgue/delete", {"ids": ["0"]}, "Deleted 1 job from the morgue."),
        ("morgue/requeue_all", {}, "Requeued all dead jobs: 2 jobs."),
        ("enqueued/delete", {"ids": ["1", "2"]}, "Deleted 2 jobs from the queue."),
    ]
    make_dead(runtime, OrdersWorker, [{"id": i} for i in range(3)])
    for path, data, message in cases:
        token = csrf(client, W + "/morgue")
        done = client.post(f"{W}/{path}", data={"csrf_token": token, **data})
        assert done.status_code == 303 and done.headers["Location"] == W + "/enqueued"
        assert message.encode() in client.get(W + "/enqueued").data, path
    assert counts(runtime, OrdersWorker) == (0, 0)
    # perform all now / kill failed / delete failed / delete all
    OrdersWorker.perform_async([{"id": "later", "perform_in": clock() + 3600}, {"id": "f"}])
    fail(runtime, OrdersWorker, ["f"])
    for path, message in [
        ("perform_all_now", "2 jobs will run now."),
        ("kill_failed", "Moved 1 job that had failed to the morgue."),
        ("delete_failed", "Deleted 0 jobs that had failed."),
        ("morgue/delete_all", "Deleted all dead jobs: 1 job."),
    ]:
        token = csrf(client, W + "/enqueued")
        client.post(f"{W}/{path}", data={"csrf_token": token})
        assert message.encode() in client.get(W + "/enqueued").data, path
    assert counts(runtime, OrdersWorker) == (1, 0)


def test_selection_without_ids_touches_nothing(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    token = csrf(client, W + "/morgue")
    client.post(W + "/morgue/delete", data={"csrf_token": token})
    assert b"No job selected." in client.get(W + "/morgue").data
    assert counts(runtime, OrdersWorker) == (0, 1)


def test_redirect_never_leaves_the_console_and_a_bad_next_is_refused_before_acting(client, runtime):
    """A CR LF in next ran the action, then answered 500; next is now checked first."""
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    token = csrf(client, W + "/morgue")
    for target in ("https://evil.example/", "//evil.example/x", "/elsewhere", "javascript:alert(1)",
                   W + "/morgue\r\nSet-Cookie: x=1", W + "/morgue\n", "/lowkiq/../elsewhere", "/lowkiq/\\evil.example",
                   "/lowkiq\x00/"):
        done = client.post(W + "/morgue/delete_all", data={"csrf_token": token, "next": target})
        assert done.status_code == 400, target
        assert "next must be a path under /lowkiq/" in done.get_data(as_text=True), target
    assert counts(runtime, OrdersWorker) == (0, 1)
    done = client.post(W + "/perform_all_now", data={"csrf_token": token})
    assert done.headers["Location"] == W + "/enqueued"
    inside = W + "/morgue?order_by=id&min=%C3%A9t%C3%A9"
    done = client.post(W + "/morgue/delete_all", data={"csrf_token": token, "next": W + "/morgue?min=été"})
    assert done.status_code == 303 and done.headers["Location"] == inside.replace("order_by=id&", "")
    assert counts(runtime, OrdersWorker) == (0, 0)


def test_get_never_changes_state(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    for path in ("/morgue/requeue_all", "/morgue/delete_all", "/kill_failed", "/perform_all_now"):
        assert client.get(W + path).status_code == 405
    assert counts(runtime, OrdersWorker) == (0, 1)


def test_confirmations_are_on_destructive_forms(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": 1}])
    html = client.get(W + "/morgue").get_data(as_text=True)
    for action in ("kill_failed", "delete_failed", "perform_all_now"):
        form = re.search(rf'<form method="post" action="{W}/{action}" class="inline" data-confirm="([^"]+)"', html)
        assert form, action
    for verb in ("requeue", "delete"):  # the morgue's bulk buttons lead to a page that counts and confirms
        button = re.search(rf'formaction="{W}/morgue/{verb}_matching">([^<]+)</button>', html)
        assert button and button.group(1).endswith("all (1)"), verb
    token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html).group(1)
    asked = client.post(W + "/morgue/delete_matching", data={"csrf_token": token, "next": W + "/morgue"})
    assert "Delete 1 dead job for good?" in asked.get_data(as_text=True) and counts(runtime, OrdersWorker) == (0, 1)


def test_listings_link_to_jobs_by_query_so_any_id_opens(client, runtime):
    tricky = ["a/../b", "/lead", "..", "q?x=1#frag", "zażółć"]
    make_dead(runtime, OrdersWorker, [{"id": i, "payload": i} for i in tricky])
    html = client.get(W + "/morgue?order_by=id&limit=100").get_data(as_text=True)
    links = re.findall(r'<td class="id"><a href="([^"]+)">', html)
    assert len(links) == len(tricky)
    for link in links:
        assert "/workers/OrdersWorker/job?id=" in link
        page = client.get(link.replace("&amp;", "&"))
        assert page.status_code == 200 and 'id="job-morgue"' in page.get_data(as_text=True)
    assert client.get(W + "/job").status_code == 400
    assert client.get(W + "/job?id=missing").status_code == 404


def test_a_page_size_from_a_link_is_kept_by_the_filter_form(client, runtime):
    OrdersWorker.perform_async([{"id": f"q{i}"} for i in range(3)])
    form = client.get(W + "/enqueued?limit=10").get_data(as_text=True).split('class="filters"')[1].split("</form>")[0]
    sizes = re.findall(r'<option value="(\d+)"( selected)?>', form.split('name="limit"')[1].split("</select>")[0])
    assert sizes == [("10", " selected"), ("25", ""), ("50", ""), ("100", "")]
