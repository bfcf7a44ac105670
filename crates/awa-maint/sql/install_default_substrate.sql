-- The default substrate, through the same helper as every custom one.
SELECT awa.install_queue_storage_substrate('awa');
