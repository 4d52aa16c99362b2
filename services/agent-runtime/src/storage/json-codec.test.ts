/**
 * Any JSON value, with any string (U+0000, lone surrogates, the escape character U+FDD0 and text
 * that looks like its escapes), goes into a real jsonb column and comes back exactly; strings
 * without those characters are stored as they are, so jsonb containment still finds them.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import fc from 'fast-check';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { ESCAPE, escapeString, fromJsonb, toJsonb, unescapeString, useJsonbCodec } from './json-codec.js';

let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase('json_codec');
  pool = useJsonbCodec(new pg.Pool({ connectionString: db.url, max: 2 }));
  await pool.query('CREATE TABLE docs (id serial PRIMARY KEY, doc jsonb NOT NULL)');
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

/** Characters that matter here, and any UTF-16 code unit (lone surrogates included). */
const unit = fc.oneof(
  fc.constantFrom('\u0000', ESCAPE, '\ud800', '\udbff', '\udc00', '\udfff', '0', 'e', 'u', 'd', '8', 'f', '"', '\\', '\n'),
  fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
  fc.constantFrom('\ud83d\ude00', `${ESCAPE}0`, `${ESCAPE}e`, `${ESCAPE}ud800`, `${ESCAPE}u`, '\\u0000'),
);
const text = fc.array(unit, { maxLength: 12 }).map((units) => units.join(''));
const { value } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    text,
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(text, tie('value'), { maxKeys: 4 }),
  ),
}));

it('escapes and restores every string', () => {
  fc.assert(
    fc.property(text, (s) => {
      const escaped = escapeString(s);
      expect(unescapeString(escaped)).toBe(s);
      // What Postgres refuses is gone; strings that need nothing are kept as they are.
      expect(escaped.isWellFormed() && !escaped.includes('\u0000')).toBe(true);
      if (s.isWellFormed() && !s.includes('\u0000') && !s.includes(ESCAPE)) expect(escaped).toBe(s);
    }),
    { numRuns: 2000 },
  );
});

it('round-trips any JSON value through a jsonb column', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(value, { minLength: 1, maxLength: 20 }), async (values) => {
      await pool.query('TRUNCATE docs');
      await pool.query('INSERT INTO docs (doc) SELECT unnest($1::jsonb[])', [values.map(toJsonb)]);
      const { rows } = await pool.query<{ doc: unknown }>('SELECT doc FROM docs ORDER BY id');
      expect(rows.map((r) => r.doc)).toEqual(values);
    }),
    { numRuns: 200 },
  );
});

it('keeps plain strings as they are, so containment queries find them', async () => {
  await pool.query('TRUNCATE docs');
  await pool.query('INSERT INTO docs (doc) VALUES ($1::jsonb)', [toJsonb({ owner: 'alice', note: 'nul\u0000here', tags: ['a', '\ud800'] })]);
  const found = await pool.query('SELECT doc FROM docs WHERE doc @> $1::jsonb', [toJsonb({ owner: 'alice', tags: ['a'] })]);
  expect(found.rows).toEqual([{ doc: { owner: 'alice', note: 'nul\u0000here', tags: ['a', '\ud800'] } }]);
  // A filter holding an escaped string is escaped the same way.
  expect((await pool.query('SELECT 1 FROM docs WHERE doc @> $1::jsonb', [toJsonb({ note: 'nul\u0000here' })])).rowCount).toBe(1);
});

it('handles nesting of any depth and large strings without recursion', () => {
  let deep: unknown = `leaf\u0000`;
  for (let i = 0; i < 1000; i++) deep = [deep];
  const jsonb = toJsonb(deep);
  expect(jsonb).not.toContain('\\u0000');
  expect(fromJsonb(jsonb)).toEqual(deep);
  const big = `${'x'.repeat(5_000_000)}\u0000${'"\\'.repeat(100_000)}`;
  expect(fromJsonb(toJsonb({ big }))).toEqual({ big });
});
