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


def test_the_dashboard_charts_only_what_redis_keeps(client, runtime):
    """No per-second chart drawn from what one gunicorn worker happened to poll: the history panel, read from
    Redis, refreshes itself instead."""
    html = client.get("/lowkiq/").get_data(as_text=True) + client.get("/lowkiq/_live").get_data(as_text=True)
    assert "per second" not in html and "<polyline" not in html
    history = client.get("/lowkiq/_history?hours=6").get_data(as_text=True)
    assert 'hx-get="/lowkiq/_history?hours=6" hx-trigger="every 30s"' in history and "data-live" in history


def test_busy_servers_audit_and_listings_refresh_in_place(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": "d"}])
    for path in (W + "/busy", W + "/enqueued?order_by=id", W + "/morgue", "/lowkiq/servers", "/lowkiq/audit"):
        html = client.get(path).get_data(as_text=True)
        live = re.search(r'<div id="live" data-live hx-get="([^"]+)" hx-select="#live" hx-trigger="every 3.0s"', html)
        assert live, path
        assert live.group(1).replace("&amp;", "&") == path, path  # it polls its own page, filters and all
        assert 'id="live-toggle"' in html and 'id="live-error"' in html, path
    tabs = client.get(W + "/_counts?tab=busy").get_data(as_text=True)
    assert re.search(r'<nav class="tabs" id="tabs" hx-get="[^"]+_counts\?tab=busy" hx-swap="outerHTML" '
                     r'hx-trigger="every 3.0s" data-live>', tabs)  # once counted, the counts poll too


def test_relative_times_carry_the_seconds_they_tick_from(client, runtime, clock):
    OrdersWorker.perform_async([{"id": "later", "perform_in": clock() + 90}])
    make_dead(runtime, OrdersWorker, [{"id": "gone"}])
    clock.advance(5)
    enqueued = client.get(W + "/enqueued").get_data(as_text=True)
    assert re.search(r'<time datetime="[^"]+" title="[^"]+" data-ago="-85.0">in 1 min</time>', enqueued)
    morgue = client.get(W + "/morgue").get_data(as_text=True)
    assert re.search(r'data-ago="5.0">5.0 s ago</time>', morgue)


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


def test_payloads_errors_and_tags_are_escaped_everywhere(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": XSS, "payload": XSS, "tags": [XSS]}], error=XSS.encode())
    OrdersWorker.perform_async([{"id": "q", "payload": {"html": XSS}, "tags": [XSS]}])
    fail(runtime, OrdersWorker, ["q"], error=XSS.encode())
    from urllib.parse import quote

    tag = "?tag=" + quote(XSS, safe="")
    for path in ("/morgue", "/enqueued", "/jobs/" + quote(XSS, safe=""), "/jobs/q", "/morgue" + tag,
                 "/enqueued" + tag):
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


def test_dead_jobs_open_newest_first_in_the_page_and_the_api(client, runtime, clock):
    for name in ("first", "second", "third"):
        make_dead(runtime, OrdersWorker, [{"id": name}])
        clock.advance(10)
    assert ids_in(client.get(W + "/morgue").data) == ["third", "second", "first"]
    assert ids_in(client.get(W + "/morgue?order_by=updated_at").data) == ["third", "second", "first"]
    assert ids_in(client.get(W + "/morgue?order_by=updated_at&desc=0").data) == ["first", "second", "third"]
    assert ids_in(client.get(W + "/morgue?order_by=id").data) == ["first", "second", "third"]  # other orders ascend
    api = client.get("/lowkiq/api/v1/workers/OrdersWorker/morgue").get_json()
    assert [job["id"] for job in api["jobs"]] == ["third", "second", "first"]
    form = client.get(W + "/morgue").get_data(as_text=True).split('class="filters"')[1].split("</form>")[0]
    assert '<option value="1" selected>descending</option>' in form
    # the queue still opens soonest due first
    OrdersWorker.perform_async([{"id": "late", "perform_in": clock() + 60}, {"id": "soon", "perform_in": clock() + 5}])
    assert ids_in(client.get(W + "/enqueued").data) == ["soon", "late"]


def test_id_bounds_say_they_compare_as_text(client, runtime):
    OrdersWorker.perform_async([{"id": f"mail-{n}"} for n in (100, 105, 1000)])
    html = client.get(W + "/enqueued?order_by=id&min=mail-100&max=mail-109").get_data(as_text=True)
    assert ids_in(html.encode()) == ["mail-100", "mail-1000", "mail-105"]  # what the note warns of
    note = re.search(r'<span class="text-order" data-text-order title="([^"]+)">\(text order\)</span>', html)
    assert note and "byte by byte" in note.group(1) and "mail-1000" in note.group(1)
    by_time = client.get(W + "/enqueued?order_by=perform_in").get_data(as_text=True)
    assert re.search(r'<span class="text-order" data-text-order title="[^"]+" hidden>', by_time)  # shown for ids only


def test_retry_now_makes_exactly_that_queued_job_due_and_is_audited(client, runtime, clock):
    later = clock() + 3600
    OrdersWorker.perform_async([{"id": i, "perform_in": later} for i in ("a", "b", "c", "b/../a")])
    page = W + "/job?id=b"
    html = client.get(page).get_data(as_text=True)
    form = re.search(r'<form method="post" class="inline" action="([^"]+)" id="retry-now">(.*?)</form>', html, re.S)
    assert form and form.group(1) == W + "/enqueued/retry_now" and ">Perform now</button>" in form.group(2)
    token = csrf(client, page)
    refused = client.post(W + "/enqueued/retry_now", data={"id": "b", "next": page})
    assert refused.status_code == 403  # no CSRF token, nothing done
    assert runtime.queries(OrdersWorker).job("b").perform_in == later
    clock.advance(1)
    done = client.post(W + "/enqueued/retry_now", data={"csrf_token": token, "id": "b", "next": page})
    assert done.status_code == 303 and done.headers["Location"] == page
    q = runtime.queries(OrdersWorker)
    assert q.job("b").perform_in == clock()
    assert [q.job(i).perform_in for i in ("a", "c", "b/../a")] == [later] * 3
    assert "Job b will run now." in client.get(page).get_data(as_text=True)
    again = client.post(W + "/enqueued/retry_now", data={"csrf_token": token, "id": "b", "next": page})
    assert "already due" in client.get(again.headers["Location"]).get_data(as_text=True)
    from lowkiq.store import audit

    entry = audit.read(runtime.client, 2)[1]
    assert (entry.action, entry.worker, entry.ids, entry.count, entry.source) == (
        "enqueued/perform_now", "OrdersWorker", ["b"], 1, "console")
    due = client.get(page).get_data(as_text=True)
    assert 'id="retry-now"' not in due and ">due now</span>" in due  # nothing to retry once due


def test_a_job_page_keeps_its_own_actions_apart_from_the_worker_s(client, runtime, clock):
    make_dead(runtime, OrdersWorker, [{"id": "dead"}])
    OrdersWorker.perform_async([{"id": "queued"}])
    fail(runtime, OrdersWorker, ["queued"])  # its retry in a minute
    for job_id, own in (("dead", ("Requeue", "Delete")), ("queued", ("Retry now", "Delete"))):
        html = client.get(W + f"/job?id={job_id}").get_data(as_text=True)
        assert "Delete all failed" not in html and "Kill all failed" not in html and "Perform all now" not in html
        section = html.split('id="job-')[1].split("</section>")[0]
        assert all(f">{label}</button>" in section for label in own), job_id
    listing = client.get(W + "/enqueued").get_data(as_text=True)
    assert 'id="worker-actions"' in listing and "Delete all failed" in listing  # where they belong


def test_a_job_with_many_payloads_shows_the_first_and_last_and_folds_the_rest(client, runtime):
    OrdersWorker.perform_async([{"id": "hot", "payload": {"v": v}, "score": v} for v in range(50)])
    html = client.get(W + "/job?id=hot").get_data(as_text=True)
    folded = html.split('class="payloads-folded" data-folded="50"')[1].split("</section>")[0]
    before, rest = folded.split('<details class="payloads-more" id="payloads-more-queued">')
    hidden, after = rest.split("</details>")
    shown = re.findall(r"{&#34;v&#34;:(\d+)}", before + after)
    assert shown == [str(v) for v in (*range(10), *range(40, 50))]
    assert "<summary>Show all 50 payloads (30 more between the first and the last 10)</summary>" in hidden
    assert re.findall(r"{&#34;v&#34;:(\d+)}", hidden) == [str(v) for v in range(10, 40)]
    OrdersWorker.perform_async([{"id": "few", "payload": v, "score": v} for v in range(12)])
    small = client.get(W + "/job?id=few").get_data(as_text=True)
    assert "payloads-folded" not in small and "12 payloads" in small


def test_a_caps_drops_show_on_the_dashboard_the_worker_page_and_the_api(client, configure):
    import lowkiq

    class CappedWorker(lowkiq.Worker):
        shards_count = 1
        max_payloads_per_id = 2

        def perform(self, payloads_by_id):
            pass

    configure(workers=[OrdersWorker, MailerWorker, CappedWorker])
    OrdersWorker.perform_async([{"id": 1}])
    assert 'data-dropped' not in client.get("/lowkiq/").get_data(as_text=True)  # nothing dropped: nothing said
    CappedWorker.perform_async([{"id": "x", "payload": v, "score": v} for v in range(5)])
    html = client.get("/lowkiq/").get_data(as_text=True)
    assert 'data-dropped="3"' in html and "3 dropped" in html
    counts_html = client.get("/lowkiq/workers/CappedWorker/_counts").get_data(as_text=True)
    assert 'data-count="dropped"' in counts_html and "3 dropped</span>" in counts_html, counts_html[:3000]
    rows = {q["name"]: q for q in client.get("/lowkiq/api/v1/dashboard").get_json()["queues"]}
    assert rows["CappedWorker"]["dropped"] == 3 and rows["OrdersWorker"]["dropped"] == 0
