/**
 * `berth/status-writes-in-move`: every entity with a lifecycle (libs/lifecycle) changes its status
 * in ONE function, its store's move function, which checks the move against the lifecycle table in
 * a conditional update (`WHERE status IN (the states that may move there)`). A status written
 * anywhere else skips that check: a cancelled export run set RUNNING again, a pool member marked
 * ready after it was removed.
 *
 * Reported, for each table named in the `moves` option, outside the function named for it:
 * - a Kysely update whose `.set(...)` writes `status`: `updateTable('t').set({ status })`, also
 *   through a spread (`{ ...status }`), a variable (`values.status = …; .set(values)`) or a
 *   callback (`.set((eb) => ({ status }))`);
 * - SQL text that does (`UPDATE t SET …, status = …`), in a string or a template literal.
 * Inserts are not moves (a new row starts in an initial state, see `Lifecycle.assertInitial`).
 *
 * Options: `moves` maps a table to its move function, `Class.method` or a function's name (a write
 * inside a function nested in it counts as inside it); `exemptions` maps a table to further
 * functions allowed to write it, each one a debt with a comment in the config saying why.
 */

/** `UPDATE <table> [[AS] alias] SET <assignments>` up to the clause after the assignments. */
const SQL_UPDATE = /\bUPDATE\s+(?:ONLY\s+)?("?[\w.]+"?)(?:\s+(?:AS\s+)?(?!SET\b)\w+)?\s+SET\s+([\s\S]*?)(?=\bWHERE\b|\bFROM\b|\bRETURNING\b|$)/gi;
/** `status =` as one of the assignments (`status = …`, `r.status = …`, `"status" = …`). */
const STATUS_ASSIGNMENT = /(?:^|,)\s*(?:\w+\.)?"?status"?\s*=(?!=)/i;

/** `schema.table`, `"table"`, `table as t` → `table`. */
function tableName(text) {
  const name = text.trim().split(/\s+/)[0].replace(/"/g, '');
  return name.slice(name.lastIndexOf('.') + 1);
}

function isStatusKey(property) {
  if (property.type !== 'Property') return false;
  if (!property.computed && property.key.type === 'Identifier') return property.key.name === 'status';
  return property.key.type === 'Literal' && property.key.value === 'status';
}

/** Whether `member` is `x.status` / `x['status']`. */
function isStatusMember(member) {
  if (member.type !== 'MemberExpression') return false;
  return member.computed ? member.property.type === 'Literal' && member.property.value === 'status' : member.property.name === 'status';
}

/** The name a function is known by in `moves`: `Class.method`, or the function's (or its variable's) name. */
function functionName(fn) {
  const parent = fn.parent;
  if (parent?.type === 'MethodDefinition' || parent?.type === 'PropertyDefinition') {
    const key = parent.key.type === 'Identifier' || parent.key.type === 'PrivateIdentifier' ? parent.key.name : String(parent.key.value);
    const owner = parent.parent.parent; // ClassBody → ClassDeclaration / ClassExpression
    return owner.id ? `${owner.id.name}.${key}` : key;
  }
  if (fn.id) return fn.id.name;
  if (parent?.type === 'VariableDeclarator' && parent.id.type === 'Identifier') return parent.id.name;
  if (parent?.type === 'Property' && parent.key.type === 'Identifier') return parent.key.name;
  return undefined;
}

const FUNCTIONS = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression']);

/** @type {import('eslint').Rule.RuleModule} */
export default {
  meta: {
    type: 'problem',
    docs: { description: "a lifecycle's status is written only by its move function" },
    schema: [
      {
        type: 'object',
        properties: {
          moves: { type: 'object', additionalProperties: { type: 'string' } },
          exemptions: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } },
        },
        required: ['moves'],
        additionalProperties: false,
      },
    ],
    messages: {
      write: 'the status of {{table}} changes only in {{move}}, which checks the move against its lifecycle: call it instead',
    },
  },
  create(context) {
    const { moves, exemptions = {} } = context.options[0];
    const sourceCode = context.sourceCode;

    /** The variable `identifier` refers to, if it is declared in this file. */
    const variableOf = (identifier) => {
      for (let scope = sourceCode.getScope(identifier); scope; scope = scope.upper) {
        const variable = scope.set.get(identifier.name);
        if (variable) return variable;
      }
      return undefined;
    };

    /** Whether a value given to `.set(…)` writes `status`; `seen` stops at variables already followed. */
    const writesStatus = (node, seen = new Set()) => {
      switch (node?.type) {
        case 'ObjectExpression':
          return node.properties.some((p) => isStatusKey(p) || (p.type === 'SpreadElement' && writesStatus(p.argument, seen)));
        case 'TSAsExpression':
        case 'TSSatisfiesExpression':
        case 'TSNonNullExpression':
        case 'TSTypeAssertion':
          return writesStatus(node.expression, seen);
        case 'ConditionalExpression':
          return writesStatus(node.consequent, seen) || writesStatus(node.alternate, seen);
        case 'LogicalExpression':
          return writesStatus(node.left, seen) || writesStatus(node.right, seen);
        case 'ArrowFunctionExpression':
          return node.body.type !== 'BlockStatement' && writesStatus(node.body, seen);
        case 'Identifier': {
          const variable = variableOf(node);
          if (!variable || seen.has(variable)) return false;
          seen.add(variable);
          const initialized = variable.defs.some((def) => def.node.type === 'VariableDeclarator' && writesStatus(def.node.init, seen));
          // values.status = …
          const assigned = variable.references.some((ref) => {
            const member = ref.identifier.parent;
            return (
              member.type === 'MemberExpression' &&
              member.object === ref.identifier &&
              isStatusMember(member) &&
              member.parent.type === 'AssignmentExpression' &&
              member.parent.left === member
            );
          });
          return initialized || assigned;
        }
        default:
          return false;
      }
    };

    /** The table of the Kysely update a `.set(…)` call belongs to (`db.updateTable('t')…set(…)`). */
    const updatedTable = (setCall, seen = new Set()) => {
      let node = setCall.callee.object;
      while (node) {
        if (node.type === 'CallExpression' && node.callee.type === 'MemberExpression') {
          const { property } = node.callee;
          if (!node.callee.computed && property.name === 'updateTable') {
            const [arg] = node.arguments;
            return arg?.type === 'Literal' && typeof arg.value === 'string' ? tableName(arg.value) : undefined;
          }
          node = node.callee.object;
        } else if (node.type === 'MemberExpression') node = node.object;
        else if (node.type === 'TSNonNullExpression' || node.type === 'AwaitExpression')
          node = node.type === 'AwaitExpression' ? node.argument : node.expression;
        else if (node.type === 'Identifier') {
          // let update = db.updateTable('t'); … update.set(…)
          const variable = variableOf(node);
          if (!variable || seen.has(variable)) return undefined;
          seen.add(variable);
          for (const def of variable.defs) {
            if (def.node.type !== 'VariableDeclarator' || def.node.init?.type !== 'CallExpression') continue;
            const table = updatedTable({ callee: { object: def.node.init } }, seen);
            if (table) return table;
          }
          return undefined;
        } else return undefined;
      }
      return undefined;
    };

    /** Reports `node` unless it is inside the table's move function or an exempted one. */
    const check = (node, table) => {
      if (!Object.hasOwn(moves, table)) return;
      const allowed = new Set([moves[table], ...(exemptions[table] ?? [])]);
      for (const ancestor of sourceCode.getAncestors(node)) {
        if (FUNCTIONS.has(ancestor.type) && allowed.has(functionName(ancestor))) return;
      }
      context.report({ node, messageId: 'write', data: { table, move: moves[table] } });
    };

    const checkSql = (node, text) => {
      for (const [, table, assignments] of text.matchAll(SQL_UPDATE)) {
        if (STATUS_ASSIGNMENT.test(assignments)) check(node, tableName(table));
      }
    };

    return {
      'CallExpression[callee.type="MemberExpression"][callee.property.name="set"]'(node) {
        const table = updatedTable(node);
        if (table !== undefined && writesStatus(node.arguments[0])) check(node, table);
      },
      Literal(node) {
        if (typeof node.value === 'string') checkSql(node, node.value);
      },
      TemplateLiteral(node) {
        // An interpolation stands for a value (`status = ${to}`), never for SQL keywords here.
        checkSql(node, node.quasis.map((q) => q.value.cooked ?? q.value.raw).join('$1'));
      },
    };
  },
};
