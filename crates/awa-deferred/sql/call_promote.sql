-- DeferredPlane::promote_due.
SELECT {schema}.deferred_promote($1)
