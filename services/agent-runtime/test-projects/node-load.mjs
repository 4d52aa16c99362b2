// Loads the echo project through @berth/langgraph-project in a plain Node process (no jest, no tsx CLI), so
// the tsx loader registration path of import-module.ts is exercised. Prints one JSON line.
// Usage: node test-projects/node-load.mjs  (run by libs/langgraph-project/src/graphs.test.ts)
import { register } from 'tsx/esm/api';

// Only to run the library's own TypeScript; the project's graph files are then loaded by the
// process-wide loader that its import-module.ts registers.
const scoped = register({ namespace: 'berth-node-load' });
const project = await scoped.import('../../../libs/langgraph-project/src/index.ts', import.meta.url);
const { MemorySaver } = await import('@langchain/langgraph');
const { HumanMessage } = await import('@langchain/core/messages');

const config = project.loadProjectConfig(new URL('./echo/langgraph.json', import.meta.url).pathname);
const graphs = await project.loadGraphs(config);
const echo = graphs.get('echo');
const graph = await echo.getGraph(undefined, { checkpointer: new MemorySaver() });
const out = await graph.invoke(
  { messages: [new HumanMessage('from node')] },
  { configurable: { thread_id: 'node-load' }, context: { system_prompt: 'plain' } },
);
const schemas = await project.graphSchemas(echo);
console.log(
  JSON.stringify({
    reply: out.messages.at(-1).content,
    contextKeys: Object.keys(schemas.context_schema?.properties ?? {}),
    messagesType: schemas.state_schema?.properties?.messages?.langgraph_type ?? null,
  }),
);
