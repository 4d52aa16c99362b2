// Loads a project through @berth/langgraph-project in a plain Node process and prints, for each graph, its
// context schema's property names, the problems of a context with an unknown key, and whether the
// graph was built by another copy of @langchain/langgraph than the server's. One JSON line.
// Usage: node test-projects/context-load.mjs <langgraph.json>  (run by src/project/schemas.test.ts)
import { register } from 'tsx/esm/api';

const scoped = register({ namespace: 'berth-context-load' });
const project = await scoped.import('../../../libs/langgraph-project/src/index.ts', import.meta.url);
const { StateGraph } = await import('@langchain/langgraph');

const graphs = await project.loadGraphs(project.loadProjectConfig(process.argv[2]));
const out = {};
for (const [id, graph] of graphs) {
  out[id] = {
    contextKeys: Object.keys((await project.graphSchemas(graph)).context_schema?.properties ?? {}),
    problems: project.contextValidator(graph)({ model: 'm', bogus: 1 }).map((p) => `${p.path.join('.')}: ${p.type}`),
    ownCopy: graph.template.builder.constructor !== StateGraph,
  };
}
console.log(JSON.stringify(out));
