"""What the console's scripts need from the server's HTML: the times to rewrite, and the filter inputs
that become date-time pickers (the behaviour itself is tested in Chromium, test_browser_layout)."""

from __future__ import annotations

import re

from webui_support import OrdersWorker, make_dead

W = "/lowkiq/workers/OrdersWorker"


def test_absolute_times_carry_their_iso_time_and_the_header_has_the_toggle(client, runtime):
    make_dead(runtime, OrdersWorker, [{"id": "a"}])
    page = client.get(W + "/morgue").get_data(as_text=True)
    stamps = re.findall(r'<div class="sub" data-time="([^"]+)">([^<]+)</div>', page)
    assert stamps and all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", iso) for iso, _ in stamps)
    assert 'id="tz-toggle"' in page and "hidden" in page.split('id="tz-toggle"')[1].split(">")[0]


def test_the_filter_form_marks_its_bounds_and_the_time_orders(client, runtime):
    page = client.get(W + "/enqueued?order_by=perform_in&min=1700000000").get_data(as_text=True)
    form = page.split('class="filters"')[1].split("</form>")[0]
    assert 'data-time-orders="perform_in updated_at"' in form
    assert re.search(r'name="min" value="1700000000"[^>]*data-bound', form)  # a number: the picker shows it local
    assert 'name="max" value=""' in form and form.count("data-bound") == 2
