/**
 * A two-turn conversation traced into Berth with the official `langsmith` client, then read back the
 * way the SDK recommends today: the runs with `client.runs.query()`, a user's feedback on a turn, and
 * the conversation as a thread with its stats.
 *
 *   LANGSMITH_ENDPOINT=$URL LANGSMITH_API_KEY=$KEY node examples/traces/conversation.mjs
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'langsmith';
import { getCurrentRunTree, traceable } from 'langsmith/traceable';

const client = new Client(); // LANGSMITH_ENDPOINT (the gateway) and LANGSMITH_API_KEY (a Berth API key)
const project = process.env.LANGSMITH_PROJECT ?? 'readme-conversation';
const thread = `conversation-${randomUUID().slice(0, 8)}`;
const traced = { client, project_name: project, tracingEnabled: true };

// A stand-in model call: an llm run that reports its token usage, as chat model integrations do.
const model = traceable(
  async (question) => ({ content: `You asked: ${question}`, usage_metadata: { input_tokens: 12, output_tokens: 5, total_tokens: 17 } }),
  { name: 'model', run_type: 'llm', ...traced },
);
// One turn of the conversation: the thread's id in the root run's metadata groups the turns.
const turns = [];
const chat = traceable(
  async (question) => {
    turns.push(getCurrentRunTree().id);
    return { answer: (await model(question)).content };
  },
  { name: 'chat', run_type: 'chain', metadata: { thread_id: thread }, ...traced },
);

await chat('What is a berth?');
await chat('And a mooring?');
await client.awaitPendingTraceBatches(); // the client sends traces in the background
const { id: projectId } = await client.readProject({ projectName: project });

// The user liked the first answer.
await client.createFeedback(turns[0], 'thumbs_up', { score: 1, comment: 'clear', sessionId: projectId });

for await (const run of client.runs.query({
  project_ids: [projectId],
  filter: `eq(thread_id, "${thread}")`,
  selects: ['NAME', 'RUN_TYPE', 'STATUS', 'TOTAL_TOKENS', 'FEEDBACK_STATS'],
})) {
  console.log(`run ${run.name} (${run.run_type}) ${run.status}, ${run.total_tokens} tokens, feedback ${JSON.stringify(run.feedback_stats ?? {})}`);
}
const stats = await client.threads.stats(thread, { session_id: projectId, selects: ['TURNS', 'TOTAL_TOKENS'] });
console.log(`thread ${thread}: ${stats.turns} turns, ${stats.total_tokens} tokens`);
