/**
 * Every migration added since the last release runs while that release still serves (a rolling
 * `helm upgrade`: new pods migrate at start, old pods keep answering), so it may only expand the
 * schema, unless it is a contract step whose header says the serving release no longer uses what
 * it removes (docs/operate/upgrade.md). The releases are the upgrade test's fixtures
 * (cli/test-fixtures/upgrade/<release>/migrations.json: the migrations each shipped, with their
 * sha256); the newest is the one a roll starts from.
 */
import { describe, expect, it } from '@jest/globals';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  contractHeader,
  contractingStatements,
  expandContractProblems,
  latestRelease,
  migrationDigest,
  sqlStatements,
  type MigrationSource,
  type ReleasedMigrations,
} from './expand-contract.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const releasesDir = join(root, 'cli/test-fixtures/upgrade');

/** Every `<services|libs>/<package>/migrations/*.sql` of the checkout. */
async function checkoutMigrations(): Promise<MigrationSource[]> {
  const sources: MigrationSource[] = [];
  for (const top of ['services', 'libs']) {
    for (const pkg of await readdir(join(root, top))) {
      const dir = join(root, top, pkg, 'migrations');
      const files = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return [];
        throw error;
      });
      for (const file of files.filter((f) => f.endsWith('.sql')).sort()) {
        sources.push({ path: `${top}/${pkg}/migrations/${file}`, sql: await readFile(join(dir, file), 'utf8') });
      }
    }
  }
  return sources;
}

async function lastRelease(): Promise<{ release: string; released: ReleasedMigrations }> {
  const release = latestRelease(await readdir(releasesDir));
  if (!release) throw new Error(`no release in ${releasesDir}`);
  return { release, released: JSON.parse(await readFile(join(releasesDir, release, 'migrations.json'), 'utf8')) as ReleasedMigrations };
}

describe("the checkout's migrations against the last release", () => {
  it('only expand what the last release uses, and leave its own migrations as it shipped them', async () => {
    const [migrations, { release, released }] = await Promise.all([checkoutMigrations(), lastRelease()]);
    expect(Object.keys(released).length).toBeGreaterThan(0);
    // Every release migration is found where the checkout keeps migrations (the scan sees them all).
    expect(Object.keys(released).filter((path) => !migrations.some((m) => m.path === path))).toEqual([]);
    expect(migrations.length).toBeGreaterThan(Object.keys(released).length);
    expect(expandContractProblems(migrations, release, released)).toEqual([]);
  });
});

describe('expandContractProblems', () => {
  const released: ReleasedMigrations = { 'services/x/migrations/0001_init.sql': migrationDigest('CREATE TABLE revisions (id uuid PRIMARY KEY, state text);') };
  const base: MigrationSource = { path: 'services/x/migrations/0001_init.sql', sql: 'CREATE TABLE revisions (id uuid PRIMARY KEY, state text);' };

  it('refuses a made-up contracting migration added since the release, naming the file, the reason and the statement', () => {
    const added = { path: 'services/x/migrations/0002_tidy.sql', sql: '-- Tidy up.\nALTER TABLE revisions DROP COLUMN state;\n' };
    expect(expandContractProblems([base, added], '0.1.0', released)).toEqual([
      'services/x/migrations/0002_tidy.sql: removes what the previous release may use (no "-- contract: <release> no longer uses <what>" header): alter table revisions drop column state',
    ]);
  });

  it('lets a contract step through when its header names a release at or before the serving one, not a later one', () => {
    const step = (release: string) => ({
      path: 'services/x/migrations/0002_drop_state.sql',
      sql: `-- Revisions keep their state in revision_states since 0.1.0.\n-- contract: ${release} no longer uses revisions.state\nALTER TABLE revisions DROP COLUMN state;\n`,
    });
    expect(expandContractProblems([base, step('0.1.0')], '0.1.0', released)).toEqual([]);
    expect(expandContractProblems([base, step('0.0.9')], '0.1.0', released)).toEqual([]);
    expect(expandContractProblems([base, step('0.2.0')], '0.1.0', released)).toEqual([
      'services/x/migrations/0002_drop_state.sql: removes what the previous release may use (its header says 0.2.0 no longer uses it, but 0.1.0 is the release serving during the roll): alter table revisions drop column state',
    ]);
  });

  it('refuses a released migration that was edited or removed', () => {
    expect(expandContractProblems([{ ...base, sql: `${base.sql}\n-- edited` }], '0.1.0', released)).toEqual([
      'services/x/migrations/0001_init.sql: changed since 0.1.0 shipped it (add a new migration instead)',
    ]);
    expect(expandContractProblems([], '0.1.0', released)).toEqual([
      'services/x/migrations/0001_init.sql: shipped in 0.1.0, gone from this checkout (never remove or renumber a released migration)',
    ]);
  });

  it('does not hold released migrations to the rule (they ran before the release served)', () => {
    const sql = 'DROP TABLE legacy;';
    expect(expandContractProblems([{ path: 'libs/y/migrations/0001_a.sql', sql }], '0.1.0', { 'libs/y/migrations/0001_a.sql': migrationDigest(sql) })).toEqual(
      [],
    );
  });
});

describe('contractingStatements', () => {
  const reasons = (sql: string) => contractingStatements(sql).map((c) => c.reason);

  it.each([
    ['CREATE TABLE t (id int PRIMARY KEY)'],
    ['CREATE INDEX t_a ON t (a)'],
    ['CREATE INDEX IF NOT EXISTS t_a ON ONLY public.t USING btree (a)'],
    ['ALTER TABLE revisions ADD COLUMN database_login text'],
    ["ALTER TABLE sessions ADD COLUMN trace_tier text CHECK (trace_tier IN ('shortlived', 'longlived'))"],
    ["ALTER TABLE t ADD COLUMN state text NOT NULL DEFAULT 'new'"],
    ['ALTER TABLE t ADD COLUMN n integer NOT NULL DEFAULT 0, ADD COLUMN at timestamptz NOT NULL DEFAULT now()'],
    ["ALTER TABLE t ADD COLUMN meta jsonb NOT NULL DEFAULT '{}'::jsonb"],
    ['ALTER TABLE t ADD COLUMN owner uuid REFERENCES owners (id) ON DELETE SET NULL'],
    ['ALTER TABLE t ALTER COLUMN state SET DEFAULT $$queued$$'],
    ['CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN DROP TABLE x; RETURN NEW; END $$'],
    ['CREATE OR REPLACE FUNCTION g(a int) RETURNS int LANGUAGE sql AS $body$ SELECT a; DELETE FROM t $body$'],
    ['CREATE TRIGGER t_fill BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION f()'],
    ["UPDATE t SET state = 'done' WHERE state IS NULL"],
    ["SELECT roll_up(tenant_id, '{}') FROM runs GROUP BY tenant_id"],
    ["COMMENT ON COLUMN t.a IS 'DROP TABLE t; it says'"],
    ["ALTER TYPE run_status ADD VALUE 'paused'"],
    // On a table the same migration creates, nothing is in use yet.
    ['CREATE TABLE n (id int); ALTER TABLE n ADD CONSTRAINT n_id CHECK (id > 0), ALTER COLUMN id SET NOT NULL; CREATE UNIQUE INDEX n_u ON n (id)'],
    // A function dropped and made again in the one transaction is replaced, not removed.
    ['DROP FUNCTION IF EXISTS create_run(uuid); CREATE FUNCTION create_run(uuid, text) RETURNS void LANGUAGE sql AS $$ SELECT 1 $$'],
  ])('expands: %s', (sql) => {
    expect(contractingStatements(sql)).toEqual([]);
  });

  it.each([
    ['DROP TABLE legacy', 'drops a table the previous release may use'],
    ['DROP INDEX runs_pending', 'drops an index the previous release may use'],
    ['DROP FUNCTION create_run(uuid)', 'drops a function the previous release may use'],
    ['DROP TRIGGER runs_fill ON runs', 'drops a trigger the previous release may use'],
    ['DROP TYPE run_status', 'removes what the previous release may use'],
    ['ALTER TABLE t DROP COLUMN a', 'removes what the previous release may use'],
    ['ALTER TABLE t DROP CONSTRAINT t_a_key', 'removes what the previous release may use'],
    ['ALTER TABLE t RENAME COLUMN a TO b', 'a rename: the previous release uses the old name'],
    ['ALTER TABLE t RENAME TO u', 'a rename: the previous release uses the old name'],
    ['ALTER INDEX t_a RENAME TO t_b', 'a rename: the previous release uses the old name'],
    ['ALTER TABLE t ALTER COLUMN a TYPE bigint', "a column's type changes under the previous release"],
    ['ALTER TABLE t ALTER a SET DATA TYPE bigint', "a column's type changes under the previous release"],
    ['ALTER TABLE t ALTER COLUMN a SET NOT NULL', 'SET NOT NULL: the previous release may write nulls'],
    ['ALTER TABLE t ALTER COLUMN a DROP NOT NULL', 'DROP NOT NULL: the previous release reads the column as never null'],
    ['ALTER TABLE t ALTER COLUMN a DROP DEFAULT', "DROP DEFAULT: the previous release's inserts rely on the default"],
    ['ALTER TABLE t ADD COLUMN b text NOT NULL', "NOT NULL without a default: the previous release's inserts, which do not name the column, fail"],
    ['ALTER TABLE t ADD COLUMN id2 uuid NOT NULL DEFAULT gen_random_uuid()', 'a default computed per row rewrites the table under an exclusive lock'],
    ['ALTER TABLE t ADD CONSTRAINT t_b CHECK (b > 0) NOT VALID', 'a new constraint on an existing table: the previous release may write what it forbids'],
    ['ALTER TABLE t ADD UNIQUE (a)', 'a new constraint on an existing table: the previous release may write what it forbids'],
    ['CREATE UNIQUE INDEX t_a ON t (a)', "a unique index on an existing table: the previous release's writes may duplicate"],
    ['ALTER TABLE t DISABLE TRIGGER t_fill', 'disables a trigger the previous release relies on'],
    ['TRUNCATE t', 'empties a table the previous release reads'],
    ['REVOKE SELECT ON t FROM reader', 'revokes a privilege the previous release may use'],
    [
      'DO $$ BEGIN EXECUTE $q$ALTER TABLE t DROP COLUMN a$q$; END $$',
      'a DO block cannot be checked: write its statements out, or mark the migration a contract step',
    ],
    ['ALTER TABLE t ENABLE ROW LEVEL SECURITY', 'not known to be safe under the previous release'],
  ])('contracts: %s', (sql, reason) => {
    expect(reasons(sql)).toEqual([reason]);
  });

  it('finds the contracting statement among expanding ones, and only it', () => {
    expect(contractingStatements('CREATE TABLE a (id int);\nALTER TABLE b DROP COLUMN c;\nINSERT INTO a VALUES (1);')).toEqual([
      { statement: 'alter table b drop column c', reason: 'removes what the previous release may use' },
    ]);
  });
});

describe('sqlStatements', () => {
  it('takes out comments, string literals, dollar-quoted bodies and quoted identifiers before splitting at semicolons', () => {
    const sql = [
      '-- DROP TABLE a; in a comment',
      "/* a block /* nested; */ DROP TABLE b; */ INSERT INTO t VALUES ('x; DROP TABLE c', E'it\\'s; DROP TABLE d');",
      'CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $fn$ SELECT 1; DROP TABLE e $fn$;',
      'ALTER TABLE "Odd;Name" ADD COLUMN "Drop Me" text;',
      'SELECT $1::int',
    ].join('\n');
    expect(sqlStatements(sql)).toEqual([
      "insert into t values ('', '')",
      'create function f() returns int language sql as $$',
      'alter table odd_name add column drop_me text',
      'select $1::int',
    ]);
    expect(contractingStatements(sql)).toEqual([]);
  });
});

describe('latestRelease', () => {
  it('compares versions by number, ignoring other names', () => {
    expect(latestRelease(['0.9.0', '0.10.0', '0.2.1', 'README.md'])).toBe('0.10.0');
    expect(latestRelease(['notes'])).toBeUndefined();
  });
});

describe('contractHeader', () => {
  it('reads the fixed form from the leading comment only', () => {
    expect(contractHeader('-- Why.\n-- contract: 0.2.0 no longer uses revisions.state\nALTER TABLE revisions DROP COLUMN state;')).toEqual({
      release: '0.2.0',
      what: 'revisions.state',
    });
    expect(contractHeader('ALTER TABLE revisions DROP COLUMN state;\n-- contract: 0.2.0 no longer uses revisions.state')).toBeUndefined();
    expect(contractHeader('-- contract: soon, nothing uses it\nDROP TABLE t;')).toBeUndefined();
  });
});
