/**
 * Where a graph module's subgraphs are defined in its source, so that their TypeScript types can be
 * read (type-schemas.ts): a subgraph is the graph passed as a node, `.addNode("<name>", <expr>)`;
 * its namespace is the node names leading to it (`outer|inner`), as the runtime names it.
 *
 * Read from the syntax of the one module, with its module-level names only: `<expr>` refers to a
 * subgraph by a module-level name (`child`, `child.compile()`, `(s) => child.invoke(s)`). A name
 * that turns out not to be a graph has no schemas when its types are read, so every module-level
 * name in `<expr>` is a candidate, in order. Subgraphs defined in other modules are found (by their
 * imported name) but not searched for subgraphs of their own.
 */
import ts from 'typescript';

export interface SubgraphSource {
  /** Node names from the root, `|`-separated. */
  namespace: string;
  /** Module-level names in the node's expression, one of which is the subgraph. */
  candidates: string[];
}

const MAX_DEPTH = 8;

/** The module-level name an expression is a chain of calls and property reads on (`b` of `b.addNode(…).compile()`). */
function chainRoot(expression: ts.Expression): string | undefined {
  let e: ts.Expression = expression;
  for (;;) {
    if (
      ts.isCallExpression(e) ||
      ts.isPropertyAccessExpression(e) ||
      ts.isParenthesizedExpression(e) ||
      ts.isAwaitExpression(e) ||
      ts.isNonNullExpression(e) ||
      ts.isAsExpression(e) ||
      ts.isSatisfiesExpression(e)
    )
      e = e.expression;
    else return ts.isIdentifier(e) ? e.text : undefined;
  }
}

/** Each module-level name with what defines it: its initializer and the statements calling on it (`g.addNode(…)`). */
function definitions(file: ts.SourceFile): Map<string, ts.Node[]> {
  const defs = new Map<string, ts.Node[]>();
  const add = (name: string, node?: ts.Node) => defs.set(name, [...(defs.get(name) ?? []), ...(node ? [node] : [])]);
  for (const statement of file.statements) {
    if (ts.isVariableStatement(statement)) {
      for (const d of statement.declarationList.declarations) if (ts.isIdentifier(d.name)) add(d.name.text, d.initializer);
    } else if (ts.isImportDeclaration(statement) && statement.importClause && !statement.importClause.isTypeOnly) {
      const clause = statement.importClause;
      if (clause.name) add(clause.name.text);
      if (clause.namedBindings && ts.isNamedImports(clause.namedBindings)) {
        for (const element of clause.namedBindings.elements) if (!element.isTypeOnly) add(element.name.text);
      }
    } else if (ts.isExpressionStatement(statement)) {
      const root = chainRoot(statement.expression);
      if (root && defs.has(root)) add(root, statement);
    } else if (ts.isExportAssignment(statement)) {
      add('default', statement.expression);
    }
  }
  return defs;
}

/** The subgraphs of export `exportName` of `file` (nested ones too), by namespace. */
export function findSubgraphSources(file: ts.SourceFile, exportName: string): SubgraphSource[] {
  const defs = definitions(file);
  const found = new Map<string, string[]>();

  const namesIn = (node: ts.Node): string[] => {
    const names: string[] = [];
    const visit = (n: ts.Node): void => {
      // A property's name (`x` of `a.x`, `{ x: … }`) is not a reference.
      if (
        ts.isIdentifier(n) &&
        defs.has(n.text) &&
        !(ts.isPropertyAccessExpression(n.parent) && n.parent.name === n) &&
        !(ts.isPropertyAssignment(n.parent) && n.parent.name === n)
      ) {
        if (!names.includes(n.text)) names.push(n.text);
      }
      ts.forEachChild(n, visit);
    };
    visit(node);
    return names;
  };

  const addNodeCalls = (nodes: ts.Node[]): { node: string; candidates: string[] }[] => {
    const calls: { node: string; candidates: string[] }[] = [];
    const visit = (n: ts.Node): void => {
      ts.forEachChild(n, visit); // Inner calls first: `b.addNode("a", …).addNode("b", …)` lists "a" first.
      if (ts.isCallExpression(n) && ts.isPropertyAccessExpression(n.expression) && n.expression.name.text === 'addNode') {
        const [name, action] = n.arguments;
        if (name && action && ts.isStringLiteralLike(name)) calls.push({ node: name.text, candidates: namesIn(action) });
      }
    };
    for (const node of nodes) visit(node);
    return calls;
  };

  const search = (name: string, namespace: string[], visiting: string[]): void => {
    if (namespace.length >= MAX_DEPTH || visiting.includes(name)) return;
    const nodes = defs.get(name) ?? [];
    const calls = addNodeCalls(nodes);
    if (calls.length === 0) {
      // `graph = builder.compile()`: the graph is the one its definition is built on.
      for (const node of nodes) {
        const root = ts.isExpression(node) ? chainRoot(node) : undefined;
        if (root && root !== name) search(root, namespace, [...visiting, name]);
      }
      return;
    }
    for (const call of calls) {
      if (call.candidates.length === 0) continue;
      const path = [...namespace, call.node];
      const key = path.join('|');
      found.set(key, [...new Set([...(found.get(key) ?? []), ...call.candidates])]);
      for (const candidate of call.candidates) search(candidate, path, [...visiting, name]);
    }
  };

  search(exportName, [], []);
  return [...found].map(([namespace, candidates]) => ({ namespace, candidates }));
}
