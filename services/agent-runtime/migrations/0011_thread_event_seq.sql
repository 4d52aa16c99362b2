-- The next protocol v2 event number of a thread (protocol/events.ts). A thread's events live in
-- the event broker, which forgets them an hour after the last one; the number of the next event
-- is kept here at the end of each protocol run, so a stream started again after that goes on
-- from it and `seq` keeps increasing for the life of the thread.
ALTER TABLE threads ADD COLUMN event_seq bigint NOT NULL DEFAULT 0 CHECK (event_seq >= 0);
