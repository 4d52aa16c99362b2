// A route's full path is written literally where it is declared, so that a URL from a log (or a
// client's error) finds its route with grep: `path:` of an `Api.route({ ... })` declaration is a plain
// string, never a template literal, a concatenation or a constant defined elsewhere.

/** @type {import('eslint').Rule.RuleModule} */
const literalRoutePaths = {
  meta: {
    type: 'problem',
    docs: { description: 'Route declarations (`.route({ path })`) take a literal path string' },
    schema: [],
    messages: {
      literal: "Write the route's full path as one string literal (e.g. '/api/v2/sandboxes/boxes/{name}') so a URL from a log finds it with grep.",
    },
  },
  create(context) {
    return {
      'CallExpression[callee.type="MemberExpression"][callee.property.name="route"] > ObjectExpression.arguments:first-child'(node) {
        for (const property of node.properties) {
          if (property.type !== 'Property' || property.computed || property.key.type !== 'Identifier' || property.key.name !== 'path') continue;
          const value = property.value;
          const literal = value.type === 'Literal' && typeof value.value === 'string';
          if (!literal) context.report({ node: value, messageId: 'literal' });
        }
      },
    };
  },
};

/** The config entry: TypeScript sources (parsed by the entry before it, which sets the parser). */
export default {
  files: ['libs/*/src/**/*.ts', 'services/*/src/**/*.ts'],
  // Tests build throwaway routes in loops; the rule is about the routes a server serves.
  ignores: ['**/*.test.ts', '**/__tests__/**'],
  plugins: { 'berth-routes': { rules: { 'literal-route-paths': literalRoutePaths } } },
  rules: { 'berth-routes/literal-route-paths': 'error' },
};
