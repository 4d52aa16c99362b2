/**
 * `berth/no-process-env`: `process.env` is read (or written) only by a package's `src/env.ts`,
 * which parses it with its zod schema and hands typed config to the classes that need it (they take
 * it in their constructor). Code elsewhere that reads the environment has settings nobody can find,
 * document or test without changing the process.
 *
 * The rule reports every access; which files may access it is the config's `ignores`
 * (tools/lint/eslint.config.mjs): the `src/env.ts` files, tests, test-support libraries and
 * scripts. A deliberate access elsewhere (handing a project's env to graph code, which reads
 * `process.env` as under `langgraph dev`) carries a disable comment saying why.
 */

const MESSAGE = "process.env is read only in the package's src/env.ts (its zod schema): take the value as config instead";

const PROCESS_MODULES = new Set(['process', 'node:process']);

/** Whether `node` is `process` itself (`process` or `globalThis.process`). */
function isProcess(node) {
  if (node.type === 'Identifier') return node.name === 'process';
  return (
    node.type === 'MemberExpression' &&
    !node.computed &&
    node.property.name === 'process' &&
    node.object.type === 'Identifier' &&
    node.object.name === 'globalThis'
  );
}

/** Whether a member's property is `env` (`x.env`, `x['env']`). */
function isEnvProperty(member) {
  if (!member.computed) return member.property.type === 'Identifier' && member.property.name === 'env';
  return member.property.type === 'Literal' && member.property.value === 'env';
}

/** @type {import('eslint').Rule.RuleModule} */
export default {
  meta: {
    type: 'problem',
    docs: { description: "process.env only in a package's src/env.ts" },
    schema: [],
    messages: { env: MESSAGE },
  },
  create(context) {
    /** Whether the identifier `process` at `node` is Node's (the global, or imported from `node:process`), not a local. */
    const isNodeProcess = (node) => {
      for (let scope = context.sourceCode.getScope(node); scope; scope = scope.upper) {
        const variable = scope.set.get(node.name);
        if (!variable) continue;
        return variable.defs.every((def) => def.type === 'ImportBinding' && PROCESS_MODULES.has(def.parent.source.value));
      }
      return true;
    };
    return {
      MemberExpression(node) {
        if (isEnvProperty(node) && isProcess(node.object) && (node.object.type !== 'Identifier' || isNodeProcess(node.object))) {
          context.report({ node, messageId: 'env' });
        }
      },
      // const { env } = process
      VariableDeclarator(node) {
        if (node.id.type !== 'ObjectPattern' || !node.init || !isProcess(node.init)) return;
        for (const property of node.id.properties) {
          if (property.type === 'Property' && !property.computed && property.key.type === 'Identifier' && property.key.name === 'env') {
            context.report({ node: property, messageId: 'env' });
          }
        }
      },
      // import { env } from 'node:process'
      ImportDeclaration(node) {
        if (!PROCESS_MODULES.has(node.source.value)) return;
        for (const specifier of node.specifiers) {
          if (specifier.type === 'ImportSpecifier' && (specifier.imported.name ?? specifier.imported.value) === 'env') {
            context.report({ node: specifier, messageId: 'env' });
          }
        }
      },
    };
  },
};
