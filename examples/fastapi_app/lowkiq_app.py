"""The app file of the lowkiq server: lowkiq -r lowkiq_app.py"""

from orders_api.workers import OrdersWorker

import lowkiq

lowkiq.configure(workers=[OrdersWorker])  # Redis: LOWKIQ_REDIS_URL, else REDIS_URL
