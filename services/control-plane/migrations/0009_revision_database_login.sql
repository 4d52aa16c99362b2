-- Which of its deployment's two database logins a revision's agent servers connect with
-- (agent-databases.ts). A new revision never takes the serving revision's login, even while that
-- one is still starting and holds no session yet; null for revisions deployed before this
-- migration, which the count of sessions decides for, as before.
ALTER TABLE revisions ADD COLUMN database_login text;
