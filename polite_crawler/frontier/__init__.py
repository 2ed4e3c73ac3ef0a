"""The host gate: per-origin queues, eligibility, durable state (see core and scheduler)."""
