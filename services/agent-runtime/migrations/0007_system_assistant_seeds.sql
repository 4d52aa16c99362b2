-- What LANGGRAPH_CONFIG last gave each graph's system assistant ({"config", "context"}). Startup
-- applies LANGGRAPH_CONFIG only when it differs from this, so edits made to the assistant through
-- the API survive restarts while an edited LANGGRAPH_CONFIG still takes effect. Kept apart from
-- `assistants` so it never shows in what clients (or runs) see of an assistant.
CREATE TABLE system_assistant_seeds (
  assistant_id uuid PRIMARY KEY REFERENCES assistants (assistant_id) ON DELETE CASCADE,
  applied jsonb NOT NULL
);
