import asyncio
import logging

import lowkiq

log = logging.getLogger(__name__)


class OrdersWorker(lowkiq.Worker):
    shards_count = 8
    batch_size = 10
    concurrency = 50  # batches in flight at once per server process, on its event loop (docs/async.md)

    async def perform(self, payloads_by_id):  # {"42": [payload, ...]}, oldest score first
        for order_id, payloads in payloads_by_id.items():
            await push_to_erp(order_id, payloads[-1])  # the newest version; other orders' batches run meanwhile
            log.info("order %s synced: %s", order_id, payloads[-1])


async def push_to_erp(order_id, payload):
    await asyncio.sleep(0)  # e.g. await an httpx.AsyncClient's post
