import logging

import lowkiq

log = logging.getLogger(__name__)


class OrdersWorker(lowkiq.Worker):
    shards_count = 8
    batch_size = 10

    def perform(self, payloads_by_id):  # {"42": [payload, ...]}, oldest score first
        for order_id, payloads in payloads_by_id.items():
            log.info("order %s synced: %s", order_id, payloads[-1])  # e.g. push the newest version to the ERP
