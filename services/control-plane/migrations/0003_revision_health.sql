-- Why a deployed revision's agent server does not answer now (it crashed and is being restarted, or
-- the control plane restarted and is bringing it back); NULL while it is healthy. The deployment
-- of a serving revision with a message is UNHEALTHY and its traffic is refused with this reason.
ALTER TABLE revisions ADD COLUMN health_message text;
