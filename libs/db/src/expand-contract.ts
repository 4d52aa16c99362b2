/**
 * Expand/contract: during a rolling upgrade the new release's pods migrate the database while the
 * previous release's pods still serve on it, so every migration added since the last release must
 * leave that release working — it may only expand the schema (new tables, indexes, nullable columns
 * or columns with a constant default, functions, triggers, backfills). A statement that removes or
 * narrows what the previous release may use (DROP, RENAME, a column's type, SET NOT NULL, a new
 * constraint on an existing table, …) is a contract step: it ships one release after the expand,
 * once no release that may still serve uses what it removes, and says so in its header:
 *
 *     -- contract: 0.2.0 no longer uses revisions.legacy_state
 *
 * (docs/operate/upgrade.md). The SQL is read soberly: comments, string literals, dollar-quoted
 * bodies and quoted identifiers are taken out before statements are split and classified, and a
 * statement not known to be expanding counts as contracting.
 */
import { createHash } from 'node:crypto';

/** A statement of a migration that the previous release may not survive. */
export interface ContractingStatement {
  /** The statement, comments and literals taken out, whitespace collapsed (at most 120 characters). */
  statement: string;
  /** Why the previous release may break on it. */
  reason: string;
}

/** What a migration's `-- contract:` header claims. */
export interface ContractHeader {
  /** The release from which on nothing uses what the migration removes. */
  release: string;
  /** What it removes, in the header's words. */
  what: string;
}

/** A migration file of the checkout: its path from the repository root and its text. */
export interface MigrationSource {
  path: string;
  sql: string;
}

/** The migrations a release shipped: path from the repository root → sha256 of the file. */
export type ReleasedMigrations = Record<string, string>;

/** The fixed form of a contract step's header line. */
export const CONTRACT_HEADER = /^--\s*contract:\s*(\d+\.\d+\.\d+)\s+no longer uses\s+(\S.*?)\s*$/;

/** sha256 (hex) of a migration's text, as releases record it. */
export function migrationDigest(sql: string): string {
  return createHash('sha256').update(sql).digest('hex');
}

/**
 * The statements of `sql`, lowercased, with comments removed, string literals replaced by `''`,
 * dollar-quoted bodies by `$$`, quoted identifiers by their text (non-word characters as `_`) and
 * whitespace collapsed.
 */
export function sqlStatements(sql: string): string[] {
  const statements: string[] = [];
  let current = '';
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    const next = sql[i + 1];
    if (c === '-' && next === '-') {
      const end = sql.indexOf('\n', i);
      i = end < 0 ? sql.length : end;
      current += ' ';
    } else if (c === '/' && next === '*') {
      // Block comments nest in Postgres.
      let depth = 0;
      do {
        if (sql.startsWith('/*', i)) {
          depth++;
          i += 2;
        } else if (sql.startsWith('*/', i)) {
          depth--;
          i += 2;
        } else i++;
      } while (depth > 0 && i < sql.length);
      current += ' ';
    } else if (c === "'") {
      // E'…' takes backslash escapes; '' is a quote in either.
      const escapes = /[eE]$/.test(current) && !/\w[eE]$/.test(current);
      if (escapes) current = current.slice(0, -1);
      i++;
      while (i < sql.length) {
        if (escapes && sql[i] === '\\') i += 2;
        else if (sql[i] === "'" && sql[i + 1] === "'") i += 2;
        else if (sql[i] === "'") break;
        else i++;
      }
      i++;
      current += "''";
    } else if (c === '"') {
      let name = '';
      i++;
      while (i < sql.length) {
        if (sql[i] === '"' && sql[i + 1] === '"') {
          name += '"';
          i += 2;
        } else if (sql[i] === '"') break;
        else name += sql[i++];
      }
      i++;
      current += name.replace(/\W/g, '_');
    } else if (c === '$' && /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.test(sql.slice(i, i + 64)) && !/\w$/.test(current)) {
      const tag = /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i, i + 64))![0];
      const end = sql.indexOf(tag, i + tag.length);
      i = end < 0 ? sql.length : end + tag.length;
      current += ' $$ ';
    } else if (c === ';') {
      statements.push(current);
      current = '';
      i++;
    } else {
      current += c;
      i++;
    }
  }
  statements.push(current);
  return statements.map((s) => s.replace(/\s+/g, ' ').trim().toLowerCase()).filter((s) => s.length > 0);
}

/** The `-- contract:` line of the migration's leading comment, if it has one. */
export function contractHeader(sql: string): ContractHeader | undefined {
  for (const line of sql.split('\n')) {
    const trimmed = line.trim();
    if (trimmed === '') continue;
    if (!trimmed.startsWith('--')) return undefined;
    const match = CONTRACT_HEADER.exec(trimmed);
    if (match) return { release: match[1]!, what: match[2]! };
  }
  return undefined;
}

const NAME = String.raw`([\w.]+)`;

/** The unqualified name of a possibly schema-qualified one. */
function bare(name: string): string {
  return name.split('.').at(-1)!;
}

/** Splits at commas outside parentheses. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')') depth--;
    else if (text[i] === ',' && depth === 0) {
      parts.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  parts.push(text.slice(start).trim());
  return parts;
}

/**
 * Whether a column default is evaluated once and stored in the catalog (no table rewrite): a
 * literal, a cast of one, or the transaction's timestamp. Anything calling a function (e.g.
 * gen_random_uuid(), nextval()) is computed per row, rewriting the table under an exclusive lock.
 */
function constantDefault(expression: string): boolean {
  const e = expression
    .replace(/\b(now|transaction_timestamp)\s*\(\s*\)/g, 'now')
    .replace(/^\((.*)\)$/, '$1')
    .trim();
  return !/[\w$]\s*\(/.test(e) && !/\bselect\b/.test(e);
}

/** Why an ALTER TABLE action on an existing table may break the previous release, or undefined. */
function alterTableAction(action: string): string | undefined {
  if (/^add (constraint|primary key|unique|check|foreign key|exclude)\b/.test(action)) {
    return 'a new constraint on an existing table: the previous release may write what it forbids';
  }
  const column = /^add (?:column )?(?:if not exists )?[\w$]+ (.*)$/.exec(action);
  if (column) {
    const definition = column[1]!;
    if (/\bgenerated always as \(/.test(definition)) return 'a stored generated column rewrites the table under an exclusive lock';
    if (/\bprimary key\b/.test(definition)) return 'a new primary key column on an existing table';
    const fallback = /\bdefault (.+?)(?= (?:not null|null|check|references|unique|constraint|collate)\b|$)/.exec(definition);
    if (fallback && !constantDefault(fallback[1]!)) return 'a default computed per row rewrites the table under an exclusive lock';
    if (/\bnot null\b/.test(definition) && !fallback) return "NOT NULL without a default: the previous release's inserts, which do not name the column, fail";
    return undefined;
  }
  if (/^alter (?:column )?[\w$]+ (set default\b|set statistics\b|set storage\b|set compression\b)/.test(action)) return undefined;
  if (/^alter (?:column )?[\w$]+ (?:set data )?type\b/.test(action)) return "a column's type changes under the previous release";
  if (/^alter (?:column )?[\w$]+ set not null\b/.test(action)) return 'SET NOT NULL: the previous release may write nulls';
  if (/^alter (?:column )?[\w$]+ drop not null\b/.test(action)) return 'DROP NOT NULL: the previous release reads the column as never null';
  if (/^alter (?:column )?[\w$]+ drop default\b/.test(action)) return "DROP DEFAULT: the previous release's inserts rely on the default";
  if (/^drop\b/.test(action)) return 'removes what the previous release may use';
  if (/^rename\b/.test(action)) return 'a rename: the previous release uses the old name';
  if (/^(enable (always |replica )?trigger|attach partition|validate constraint|owner to|set \(|reset \(|cluster on)\b/.test(action)) return undefined;
  if (/^(disable trigger)\b/.test(action)) return 'disables a trigger the previous release relies on';
  if (/^detach partition\b/.test(action)) return 'detaches a partition whose rows the previous release reads';
  return 'not known to be safe under the previous release';
}

/** Objects of a kind created by statements of one migration (so that its other statements on them are safe). */
interface Created {
  tables: Set<string>;
  /** `function:name`, `trigger:name`, `view:name`, `index:name`. */
  objects: Set<string>;
}

function createdBy(statements: string[]): Created {
  const created: Created = { tables: new Set(), objects: new Set() };
  for (const s of statements) {
    const table = new RegExp(String.raw`^create (?:(?:unlogged|temp|temporary) )?table (?:if not exists )?${NAME}`).exec(s);
    if (table) created.tables.add(bare(table[1]!));
    const object = new RegExp(
      String.raw`^create (?:or replace )?(?:(?:constraint )?(trigger)|(function)|(procedure)|(?:materialized )?(view)|(?:unique )?(index)(?: concurrently)?(?: if not exists)?) ${NAME}`,
    ).exec(s);
    if (object) created.objects.add(`${object.slice(1, 6).find(Boolean)}:${bare(object[6]!)}`);
  }
  return created;
}

/**
 * Why `statement` (as {@link sqlStatements} gives it) may break the previous release while it
 * serves, or undefined when it only expands. `created` holds what the same migration creates: a
 * table it creates nobody else uses yet, and an object it drops and creates again within its
 * transaction is replaced, not removed.
 */
function contractingReason(statement: string, created: Created): string | undefined {
  const s = statement;
  if (/^(insert|update|delete|select|with|values|set|reset|comment on|grant)\b/.test(s)) return undefined;
  if (/^create (?:(?:unlogged|temp|temporary) )?table\b/.test(s)) return undefined;
  const index = new RegExp(String.raw`^create (unique )?index (?:concurrently )?(?:if not exists )?(?:[\w$]+ )?on (?:only )?${NAME}`).exec(s);
  if (index) {
    return index[1] && !created.tables.has(bare(index[2]!)) ? "a unique index on an existing table: the previous release's writes may duplicate" : undefined;
  }
  if (
    /^create (or replace )?((constraint )?trigger|function|procedure|aggregate|(materialized )?view|sequence|type|schema|extension|domain|policy|cast|collation|statistics)\b/.test(
      s,
    )
  ) {
    return undefined;
  }
  const alterTable = new RegExp(String.raw`^alter table (?:if exists )?(?:only )?${NAME} (.*)$`).exec(s);
  if (alterTable) {
    if (created.tables.has(bare(alterTable[1]!))) return undefined;
    for (const action of splitTopLevel(alterTable[2]!)) {
      const reason = alterTableAction(action);
      if (reason) return reason;
    }
    return undefined;
  }
  const drop = new RegExp(
    String.raw`^drop (table|(?:constraint )?trigger|function|procedure|(?:materialized )?view|index)(?: concurrently)? (?:if exists )?${NAME}`,
  ).exec(s);
  if (drop) {
    const kind = drop[1]!.replace(/^(constraint|materialized) /, '');
    if (kind === 'table' ? created.tables.has(bare(drop[2]!)) : created.objects.has(`${kind}:${bare(drop[2]!)}`)) return undefined;
    return `drops ${kind === 'index' ? 'an' : 'a'} ${kind} the previous release may use`;
  }
  if (/^drop\b/.test(s)) return 'removes what the previous release may use';
  if (/^alter type [\w.]+ add value\b/.test(s)) return undefined;
  if (/^alter (function|procedure) [\w.]+(\s*\([^)]*\))? (owner to|set|reset|security|stable|immutable|volatile|parallel)\b/.test(s)) return undefined;
  if (/^alter sequence [\w.]+ owned by\b/.test(s)) return undefined;
  if (/\brename\b/.test(s) && /^alter\b/.test(s)) return 'a rename: the previous release uses the old name';
  if (/^truncate\b/.test(s)) return 'empties a table the previous release reads';
  if (/^revoke\b/.test(s)) return 'revokes a privilege the previous release may use';
  if (/^do\b/.test(s)) return 'a DO block cannot be checked: write its statements out, or mark the migration a contract step';
  return 'not known to be safe under the previous release';
}

/** The statements of a migration that the previous release may not survive. */
export function contractingStatements(sql: string): ContractingStatement[] {
  const statements = sqlStatements(sql);
  const created = createdBy(statements);
  return statements.flatMap((statement) => {
    const reason = contractingReason(statement, created);
    return reason ? [{ statement: statement.length > 120 ? `${statement.slice(0, 117)}...` : statement, reason }] : [];
  });
}

function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
  return 0;
}

/** The newest of `releases` (names that are no `X.Y.Z` are ignored). */
export function latestRelease(releases: string[]): string | undefined {
  return releases
    .filter((r) => /^\d+\.\d+\.\d+$/.test(r))
    .sort(compareVersions)
    .at(-1);
}

/**
 * What stops the checkout's migrations from running while `release` (which shipped `released`)
 * still serves: a released migration changed or gone (installations applied it already, and the
 * edit would never run), and each contracting statement of a migration added since, unless the
 * migration is a contract step whose header names a release at or before `release`. Empty when a
 * rolling upgrade from `release` is safe.
 */
export function expandContractProblems(migrations: MigrationSource[], release: string, released: ReleasedMigrations): string[] {
  const problems: string[] = [];
  const present = new Map(migrations.map((m) => [m.path, m.sql]));
  for (const [path, digest] of Object.entries(released)) {
    const sql = present.get(path);
    if (sql === undefined) problems.push(`${path}: shipped in ${release}, gone from this checkout (never remove or renumber a released migration)`);
    else if (migrationDigest(sql) !== digest) problems.push(`${path}: changed since ${release} shipped it (add a new migration instead)`);
  }
  for (const migration of migrations) {
    if (migration.path in released) continue;
    const contracting = contractingStatements(migration.sql);
    if (contracting.length === 0) continue;
    const header = contractHeader(migration.sql);
    if (header && compareVersions(header.release, release) <= 0) continue;
    const why = header
      ? `its header says ${header.release} no longer uses it, but ${release} is the release serving during the roll`
      : `no "-- contract: <release> no longer uses <what>" header`;
    for (const c of contracting) problems.push(`${migration.path}: ${c.reason} (${why}): ${c.statement}`);
  }
  return problems;
}
