"""Webhook deliveries to ``WebhookTarget`` resources (RFC-018 ``sink/v1alpha1``): signing and
delivery with retries, each delivery recorded in the catalog."""
