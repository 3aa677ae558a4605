import logging

import lowkiq

log = logging.getLogger(__name__)


class OrdersWorker(lowkiq.Worker):
    shards_count = 8
    batch_size = 10

    def perform(self, payloads_by_id):  # {"42": [payload, ...]}, oldest first
        for order_id, payloads in payloads_by_id.items():
            # Here the project would push the newest version to its ERP, or update its models.
            log.info("order %s synced: %s", order_id, payloads[-1])
