// berth/status-writes-in-move: a lifecycle table's status written outside its move function is reported,
// whether through Kysely (directly, a spread, a variable, a callback) or SQL text; other columns, other
// tables, inserts and the move function itself are not.
import { RuleTester } from 'eslint';
import tseslint from 'typescript-eslint';
import rule from '../rules/status-writes-in-move.mjs';

const tester = new RuleTester({ languageOptions: { parser: tseslint.parser, ecmaVersion: 2024, sourceType: 'module' } });
const options = [{ moves: { pool_members: 'Pools.moveMember', revisions: 'move' }, exemptions: { pool_members: ['Pools.legacy'] } }];
const write = (table = 'pool_members', move = 'Pools.moveMember') => [{ messageId: 'write', data: { table, move } }];
/** `body` as a method of class Pools. */
const inPools = (method, body) => `class Pools { async ${method}(db, to) { ${body} } }`;

tester.run('berth/status-writes-in-move', rule, {
  valid: [
    // The move function itself, also from a callback inside it.
    { code: inPools('moveMember', "await db.updateTable('pool_members').set({ status: to }).where('status', 'in', sources).execute();"), options },
    { code: inPools('moveMember', "await db.transaction().execute(async (tx) => tx.updateTable('pool_members').set({ status: to }).execute());"), options },
    { code: "async function move(db, to) { await db.updateTable('revisions').set({ ...({ status: to } as object) }).execute(); }", options },
    { code: inPools('moveMember', "await db.query('UPDATE pool_members SET status = $2 WHERE instance = $1', [id, to]);"), options },
    // An exempted function.
    { code: inPools('legacy', "await db.updateTable('pool_members').set({ status: 'ready' }).execute();"), options },
    // Other columns, other tables, reads and inserts.
    {
      code: inPools('refill', "await db.updateTable('pool_members').set({ status_message: 'x', ready_at: now }).where('status', '=', 'ready').execute();"),
      options,
    },
    { code: inPools('refill', "await db.updateTable('pools').set({ status: 'x' }).execute();"), options },
    { code: inPools('refill', "await db.insertInto('pool_members').values({ instance, status: 'creating' }).execute();"), options },
    { code: inPools('refill', 'await db.query("UPDATE pool_members SET ready_at = now() WHERE status = \'ready\'");'), options },
    { code: inPools('refill', 'await sql`SELECT status FROM pool_members WHERE status = ${s}`.execute(db);'), options },
    { code: inPools('refill', "await db.query('UPDATE threads SET status = $2 WHERE thread_id = $1');"), options },
    { code: inPools('refill', "cache.set('status', value); this.map.set(key, { status: 'ready' });"), options },
  ],
  invalid: [
    {
      code: inPools('refill', "await db.updateTable('pool_members').set({ status: 'ready', ready_at: new Date() }).where('instance', '=', i).execute();"),
      options,
      errors: write(),
    },
    { code: inPools('refill', "await db.updateTable('pool_members as m').set({ 'status': 'failed' }).execute();"), options, errors: write() },
    // Through a spread of an object cast to escape the column's `never` update type.
    {
      code: inPools('claim', "const status = { status: 'ready' } as object; await tx.updateTable('pool_members').set({ ...status, lease: owner }).execute();"),
      options,
      errors: write(),
    },
    { code: inPools('refill', "await db.updateTable('pool_members').set({ ...(done ? { status: 'ready' } : {}) }).execute();"), options, errors: write() },
    // Through a variable filled in before the update.
    {
      code: inPools(
        'update',
        "const values = { updated_at: now }; if (repull) values.status = 'ready'; await db.updateTable('pool_members').set(values).execute();",
      ),
      options,
      errors: write(),
    },
    { code: inPools('update', "const values = { status: 'ready' }; await db.updateTable('pool_members').set(values).execute();"), options, errors: write() },
    // A callback, a `.where` before `.set`, an update built in a variable first.
    { code: inPools('refill', "await db.updateTable('pool_members').set((eb) => ({ status: eb.val('ready') })).execute();"), options, errors: write() },
    { code: inPools('refill', "await db.updateTable('pool_members').where('instance', '=', i).set({ status: 'ready' }).execute();"), options, errors: write() },
    { code: inPools('refill', "let update = db.updateTable('pool_members'); update = update.set({ status: 'ready' });"), options, errors: write() },
    // SQL text, in a string or a template literal, with or without an alias.
    {
      code: inPools('refill', 'await db.query("UPDATE pool_members SET ready_at = now(), status = \'ready\' WHERE instance = $1", [i]);'),
      options,
      errors: write(),
    },
    {
      code: inPools('refill', 'await sql`UPDATE pool_members m SET status = ${to}, ready_at = now() WHERE m.instance = ${i}`.execute(db);'),
      options,
      errors: write(),
    },
    { code: inPools('refill', 'await sql`update berth.pool_members set "status" = ${to}`.execute(db);'), options, errors: write() },
    // The move of another table, or a function of the same name in another class, is not the move.
    { code: inPools('move', "await db.updateTable('revisions').set({ status: 'FAILED' }).execute();"), options, errors: write('revisions', 'move') },
    { code: "class Other { async moveMember(db) { await db.updateTable('pool_members').set({ status: 'ready' }).execute(); } }", options, errors: write() },
  ],
});
