"""The app the image runs: its workers, and lowkiq configured for them (Redis: LOWKIQ_REDIS_URL)."""

import logging

import lowkiq

log = logging.getLogger("app")


class OrdersWorker(lowkiq.Worker):
    shards_count = 8
    batch_size = 10

    def perform(self, payloads_by_id):
        for order_id, payloads in payloads_by_id.items():
            log.info("order %s synced: %s", order_id, payloads[-1])


lowkiq.configure(workers=[OrdersWorker])
