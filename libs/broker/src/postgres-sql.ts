/**
 * The SQL of `PostgresEventBroker` (tables in `migrations/0001_run_events.sql`; unqualified names
 * resolve through the pool's `search_path`). Each operation is ONE statement, so it is atomic
 * without an explicit transaction, and its NOTIFY is sent at commit, after the rows are visible.
 *
 * Wake-up payloads (parsed by `parseWake`): `{"r":runId,"s":first,"n":count,"i":[[event,data],…]|null}`
 * for appended events, `{"r":runId,"e":next}` for an end, `{"r":runId,"d":1}` for a delete.
 */

/** Largest batch a read returns, in events. */
export const READ_BATCH_EVENTS = 500;
/** A read stops adding events once the batch holds this many bytes of data (at least one event). */
export const READ_BATCH_BYTES = 4 * 1024 * 1024;

/**
 * Appends `count` events. Parameters: $1 run id, $2 count, $3 channel, $4 inline JSON or null,
 * $5 first sequence number of a new stream, then event name and data JSON of each event. The upsert of the stream row takes its row lock,
 * so racing publishers of one run take turns; it returns no row when the stream was ended.
 */
export function appendSql(count: number): string {
  const values = Array.from({ length: count }, (_, k) => `(${k}, $${6 + 2 * k}::text, $${7 + 2 * k}::text)`).join(', ');
  return `WITH s AS (
  INSERT INTO run_streams AS s (run_id, next_seq) VALUES ($1::text, $5::bigint + $2::bigint)
  ON CONFLICT (run_id) DO UPDATE SET next_seq = s.next_seq + $2::bigint, updated_at = now()
    WHERE s.ended_at IS NULL
  RETURNING s.next_seq - $2::bigint AS first
), ins AS (
  INSERT INTO run_events (run_id, seq, event, data)
  SELECT $1::text, s.first + v.k, v.event, v.data FROM s, (VALUES ${values}) AS v (k, event, data)
)
SELECT s.first::text AS first,
  pg_notify($3::text, '{"r":' || to_json($1::text)::text || ',"s":' || s.first || ',"n":' || $2::bigint
    || ',"i":' || coalesce($4::text, 'null') || '}')
FROM s`;
}

/** Marks a stream ended (creating it empty if needed). $1 run id, $2 channel. */
export const END_SQL = `WITH s AS (
  INSERT INTO run_streams AS s (run_id, next_seq, ended_at) VALUES ($1::text, 0, now())
  ON CONFLICT (run_id) DO UPDATE SET ended_at = coalesce(s.ended_at, now()), updated_at = now()
  RETURNING s.next_seq
)
SELECT pg_notify($2::text, '{"r":' || to_json($1::text)::text || ',"e":' || s.next_seq || '}') FROM s`;

/**
 * Events after a cursor, with the stream's counter and end mark from the same snapshot.
 * $1 run id, $2 after, $3 max events, $4 max bytes. No row at all: the stream does not exist.
 */
export const READ_SQL = `SELECT s.next_seq::text AS next, s.ended_at IS NOT NULL AS ended, e.seq::text AS seq, e.event, e.data
FROM run_streams s
LEFT JOIN LATERAL (
  SELECT w.seq, w.event, w.data FROM (
    SELECT seq, event, data, sum(octet_length(data)) OVER (ORDER BY seq) AS total
    FROM run_events WHERE run_id = s.run_id AND seq > $2::bigint ORDER BY seq LIMIT $3::int
  ) w WHERE w.total - octet_length(w.data) < $4::bigint
) e ON true
WHERE s.run_id = $1::text
ORDER BY e.seq`;

/** $1 run id. */
export const HEAD_SQL = 'SELECT next_seq::text AS next, ended_at IS NOT NULL AS ended FROM run_streams WHERE run_id = $1::text';

/** Deletes a run's stream and events and wakes its subscribers. $1 run id, $2 channel. */
export const DELETE_SQL = `WITH s AS (DELETE FROM run_streams WHERE run_id = $1::text), e AS (DELETE FROM run_events WHERE run_id = $1::text)
SELECT pg_notify($2::text, '{"r":' || to_json($1::text)::text || ',"d":1}')`;

/** $1 channel, $2 payload. */
export const NOTIFY_SQL = 'SELECT pg_notify($1::text, $2::text)';

/**
 * Deletes up to $2 runs idle for longer than $1 seconds, with their events. Rows a publisher
 * holds are skipped (they are being refreshed); a row refreshed meanwhile is re-checked.
 */
export const SWEEP_SQL = `WITH gone AS (
  DELETE FROM run_streams d WHERE d.run_id IN (
    SELECT run_id FROM run_streams WHERE updated_at < now() - make_interval(secs => $1::int)
    LIMIT $2::int FOR UPDATE SKIP LOCKED
  ) AND d.updated_at < now() - make_interval(secs => $1::int)
  RETURNING d.run_id
), ev AS (
  DELETE FROM run_events e USING gone WHERE e.run_id = gone.run_id
)
SELECT count(*)::int AS runs FROM gone`;

/** Runs a sweep removes per statement; it repeats while a statement removes this many. */
export const SWEEP_BATCH_RUNS = 1000;
