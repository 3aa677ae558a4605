"""lowkiq in a Django project (``pip install lowkiq[django]``).

Add ``"lowkiq.contrib.django"`` to ``INSTALLED_APPS`` and describe lowkiq in ``settings.LOWKIQ``::

    LOWKIQ = {
        "redis_url": "redis://127.0.0.1:6379/0",
        "workers": ["orders.workers.OrdersWorker"],
    }

Django's start-up then calls ``lowkiq.configure`` with it (``conf``), ``python manage.py lowkiq``
runs the server (the options of ``lowkiq -r``), and ``path("lowkiq/", include("lowkiq.contrib.django.urls"))``
mounts the console for staff users, who are named in its audit log.
"""
