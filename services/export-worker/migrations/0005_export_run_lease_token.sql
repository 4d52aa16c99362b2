-- The fencing token of an export run's lease (libs/lease): every claim increments it, and every
-- write of the holder names it, so a worker that claimed a run again after losing it cannot write
-- with its older claim (the owner alone, one per process, does not tell the two apart).
ALTER TABLE export_runs ADD COLUMN lease_token integer NOT NULL DEFAULT 0;
