/**
 * Protocol v2 parity (issue 25): on the same graphs (test-projects/protocol/langgraph.parity.json),
 * Berth's agent server sends the event sequences the JS LangGraph server (`@langchain/langgraph-api`
 * 1.5.1, the reference implementation, in its own process) sends: values and updates, the messages
 * content-block lifecycle of a streaming model, tools, an interrupt answered with `input.respond` (at
 * the root and in a subgraph), subgraph namespaces and `depth`, replay after `since`, checkpoints and
 * tasks, custom events, a failing run; over SSE and over the WebSocket. Each scenario first pins what the JS server
 * sent (the expectation Berth must meet, readable in a diff), then compares Berth's recording with
 * it field by field. Where Berth differs on purpose, the difference is asserted on its own.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './server.js';
import { startTestServer } from './__tests__/fixtures.js';
import { spawnJsServer, type RunningJsServer } from './__tests__/js-server.js';
import { commandAnswers, recordScenario, type RecordedEvent, type Recording, type Scenario, type Transport } from './__tests__/protocol-collector.js';

const project = fileURLToPath(new URL('../test-projects/protocol/langgraph.parity.json', import.meta.url));

let db: TestDatabase;
let berth: RunningAgentServer;
let js: RunningJsServer;

beforeAll(async () => {
  db = await createTestDatabase('agent_protocol_parity');
  [berth, js] = await Promise.all([startTestServer(db.url, { configPath: project }), spawnJsServer(project)]);
}, 60_000);

afterAll(async () => {
  await Promise.all([berth?.close(), js?.stop()]);
  await db?.drop();
});

/** JSON with sorted keys: the pinned lines do not depend on the order a server builds objects in. */
function sorted(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(sorted).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${sorted((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** One line per event: method, namespace (`-` the root), node, data. */
const lines = (events: RecordedEvent[]) => events.map((e) => `${e.method} ${e.namespace.join('/') || '-'}${e.node ? ` ${e.node}` : ''} ${sorted(e.data)}`);

/** Both servers, the JS server first (a scenario's runs are short; one at a time keeps the machine calm). */
async function recordBoth(scenario: Scenario, transport: Transport = 'sse'): Promise<{ reference: Recording; ours: Recording }> {
  const reference = await recordScenario(js.url, scenario, transport);
  const ours = await recordScenario(berth.url, scenario, transport);
  return { reference, ours };
}

/**
 * Berth sends `input.answered` (protocol 0.0.21, which the SDK's stream controller reads to stop
 * offering answered interrupts in every tab) when a run that answers interrupts starts; the JS server
 * 1.5.1 speaks protocol 0.0.19, which has no such event. Asserts where Berth sends it (just before the
 * answering run's `running`, naming the interrupts that `input.requested` named) and returns the
 * recording without it.
 */
function withoutInputAnswered(recording: Recording): Recording {
  const answered = recording.events.flatMap((e, i) => (e.method === 'input.answered' ? [i] : []));
  const requested = recording.events.filter((e) => e.method === 'input.requested').map((e) => (e.data as { interrupt_id: string }).interrupt_id);
  // The scenarios answer one interrupt once.
  expect(answered).toHaveLength(requested.length ? 1 : 0);
  for (const i of answered) {
    expect(recording.events[i]).toEqual({ method: 'input.answered', namespace: [], data: { interrupt_ids: requested } });
    expect(recording.events[i + 1]).toMatchObject({ method: 'lifecycle', namespace: [], data: { event: 'running' } });
  }
  return { ...recording, events: recording.events.filter((e) => e.method !== 'input.answered') };
}

/**
 * The JS server puts its platform's keys in every run's metadata (`langgraph_version`,
 * `langgraph_plan: "developer"`, `langgraph_host: "self-hosted"`, and the assistant's `created_by`),
 * which `tasks` events show; Berth's runs carry no such keys in any API (classic streams alike), so
 * this is not a protocol v2 difference. Asserts the JS server sent them and returns its recording
 * without them.
 */
function withoutPlatformRunMetadata(recording: Recording): Recording {
  const keys = ['created_by', 'langgraph_version', 'langgraph_plan', 'langgraph_host'];
  return {
    ...recording,
    events: recording.events.map((e) => {
      const metadata = (e.data as { metadata?: Record<string, unknown> }).metadata;
      if (e.method !== 'tasks' || !metadata) return e;
      expect(Object.keys(metadata)).toEqual(expect.arrayContaining(keys));
      return { ...e, data: { ...(e.data as object), metadata: Object.fromEntries(Object.entries(metadata).filter(([k]) => !keys.includes(k))) } };
    }),
  };
}

/**
 * The JS server's answer to `subscription.subscribe` counts the events it replayed from its buffer
 * (`replayed_events`, optional in the protocol; the SDK does not read it). Berth answers before its
 * replay starts (from the broker, where it cannot know the count yet) and leaves the field out.
 * Asserts the JS server sent a count and returns its recording without it.
 */
function withoutReplayCount(recording: Recording): Recording {
  const responses = recording.responses.map((r) => {
    const { body } = r as { body: { result?: Record<string, unknown> } };
    if (!body.result || !('subscription_id' in body.result)) return r;
    expect(body.result.replayed_events).toEqual(expect.any(Number));
    const { replayed_events: _count, ...result } = body.result;
    return { ...(r as object), body: { ...body, result } };
  });
  return { ...recording, responses };
}

/** The tool message's metadata names the @langchain/core version: left out of pinned lines (asserted there). */
function withoutCoreVersion(recording: Recording): Recording {
  return {
    ...recording,
    events: recording.events.map((e) => {
      const output = (e.data as { output?: { metadata?: { versions?: unknown } } }).output;
      if (e.method !== 'tools' || !output?.metadata) return e;
      expect(output.metadata.versions).toEqual({ '@langchain/core': expect.any(String) });
      const { versions: _versions, ...metadata } = output.metadata;
      return { ...e, data: { ...(e.data as object), output: { ...output, metadata } } };
    }),
  };
}

/** `input.respond` answering the one interrupt requested with `response`. */
const answer = (response: unknown) => (requested: { interrupt_id: string }[]) => ({ interrupt_id: requested[0]?.interrupt_id, response });

const agentInput = { messages: [{ role: 'user', content: 'look up berth' }] };

describe('protocol v2: Berth sends the JS server’s event sequences', () => {
  it('values and updates of a simple graph', async () => {
    const { reference, ours } = await recordBoth({ assistant_id: 'steps', input: { steps: ['start'] }, channels: ['values', 'updates', 'lifecycle'] });
    expect(lines(reference.events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"steps"}',
      'values - {"steps":["start"]}',
      'updates - first {"steps":["first"]}',
      'values - {"steps":["start","first"]}',
      'updates - second {"steps":["second"]}',
      'values - {"steps":["start","first","second"]}',
      'lifecycle - {"event":"completed","graph_name":"steps"}',
    ]);
    expect(reference.responses).toEqual([
      { status: 200, body: { type: 'success', id: 1, result: { run_id: '<id 1>' }, meta: { thread_id: '<id 2>', applied_through_seq: '<seq>' } } },
    ]);
    expect(ours).toEqual(reference);
  }, 60_000);

  it('the content-block lifecycle of a streaming model: a tool call in chunks, text token by token, usage', async () => {
    const { reference, ours } = await recordBoth({ assistant_id: 'agent', input: agentInput, channels: ['messages', 'lifecycle'] });
    // Each model call is in the namespace of its node's task, which has a lifecycle of its own.
    expect(lines(reference.events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"agent"}',
      'lifecycle model:* {"event":"started","graph_name":"model"}',
      'messages model:* {"event":"message-start","id":"<id 1>","run_id":"<id 2>"}',
      'messages model:* {"content":{"args":"","id":"<id 3>","index":0,"name":"lookup","type":"tool_call_chunk"},"event":"content-block-start","index":0,"run_id":"<id 2>"}',
      'messages model:* {"delta":{"args":"{\\"q\\":","type":"tool-call-delta"},"event":"content-block-delta","index":0,"run_id":"<id 2>"}',
      'messages model:* {"delta":{"args":"\\"berth\\"}","type":"tool-call-delta"},"event":"content-block-delta","index":0,"run_id":"<id 2>"}',
      'messages model:* {"content":{"args":{"q":"berth"},"id":"<id 3>","name":"lookup","type":"tool_call"},"event":"content-block-finish","index":0,"run_id":"<id 2>"}',
      'messages model:* {"event":"message-finish","reason":"stop","run_id":"<id 2>"}',
      'lifecycle model:* {"event":"completed","graph_name":"model"}',
      'lifecycle tools:* {"event":"started","graph_name":"tools"}',
      'lifecycle tools:* {"event":"completed","graph_name":"tools"}',
      'lifecycle model:* {"event":"started","graph_name":"model"}',
      'messages model:* {"event":"message-start","id":"<id 4>","run_id":"<id 5>"}',
      'messages model:* {"content":{"text":"","type":"text"},"event":"content-block-start","index":0,"run_id":"<id 5>"}',
      'messages model:* {"delta":{"text":"The ","type":"text-delta"},"event":"content-block-delta","index":0,"run_id":"<id 5>"}',
      'messages model:* {"delta":{"text":"answ","type":"text-delta"},"event":"content-block-delta","index":0,"run_id":"<id 5>"}',
      'messages model:* {"delta":{"text":"er: ","type":"text-delta"},"event":"content-block-delta","index":0,"run_id":"<id 5>"}',
      'messages model:* {"delta":{"text":"found","type":"text-delta"},"event":"content-block-delta","index":0,"run_id":"<id 5>"}',
      'messages model:* {"delta":{"text":" berth","type":"text-delta"},"event":"content-block-delta","index":0,"run_id":"<id 5>"}',
      'messages model:* {"event":"usage","run_id":"<id 5>","usage":{"input_tokens":7,"output_tokens":5,"total_tokens":12}}',
      'messages model:* {"content":{"text":"The answer: found berth","type":"text"},"event":"content-block-finish","index":0,"run_id":"<id 5>"}',
      'messages model:* {"event":"message-finish","reason":"stop","run_id":"<id 5>","usage":{"input_tokens":7,"output_tokens":5,"total_tokens":12}}',
      'lifecycle model:* {"event":"completed","graph_name":"model"}',
      'lifecycle - {"event":"completed","graph_name":"agent"}',
    ]);
    expect(ours).toEqual(reference);
  }, 60_000);

  it('tools: started and finished, correlated by the tool call id', async () => {
    const { reference, ours } = await recordBoth({ assistant_id: 'agent', input: agentInput, channels: ['tools', 'lifecycle'] });
    expect(lines(withoutCoreVersion(reference).events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"agent"}',
      'lifecycle model:* {"event":"started","graph_name":"model"}',
      'lifecycle model:* {"event":"completed","graph_name":"model"}',
      'lifecycle tools:* {"event":"started","graph_name":"tools"}',
      'tools tools:* {"event":"tool-started","input":"{\\"q\\":\\"berth\\"}","tool_call_id":"call_lookup_1","tool_name":"lookup"}',
      'tools tools:* {"event":"tool-finished","output":{"additional_kwargs":{},"content":"found berth","id":"<id 1>","metadata":{},"name":"lookup","response_metadata":{},"status":"success","tool_call_id":"call_lookup_1","type":"tool"},"tool_call_id":"call_lookup_1"}',
      'lifecycle tools:* {"event":"completed","graph_name":"tools"}',
      'lifecycle model:* {"event":"started","graph_name":"model"}',
      'lifecycle model:* {"event":"completed","graph_name":"model"}',
      'lifecycle - {"event":"completed","graph_name":"agent"}',
    ]);
    expect(ours).toEqual(reference);
  }, 60_000);

  it('messages in values and updates have the JS server’s shape (content as the graph wrote it)', async () => {
    const { reference, ours } = await recordBoth({
      assistant_id: 'agent',
      input: agentInput,
      channels: ['values', 'updates', 'lifecycle'],
      namespaces: [[]],
      depth: 0,
    });
    expect(lines(reference.events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"agent"}',
      'values - {"messages":[{"content":"look up berth","id":"<id 1>","type":"human"}]}',
      'updates - model {"messages":[{"content":[{"args":{"q":"berth"},"id":"<id 2>","name":"lookup","type":"tool_call"}],"id":"<id 3>","response_metadata":{"finish_reason":"stop","output_version":"v1"},"tool_calls":[{"args":{"q":"berth"},"id":"<id 2>","name":"lookup","type":"tool_call"}],"type":"ai"}]}',
      'values - {"messages":[{"content":"look up berth","id":"<id 1>","type":"human"},{"content":[{"args":{"q":"berth"},"id":"<id 2>","name":"lookup","type":"tool_call"}],"id":"<id 3>","response_metadata":{"finish_reason":"stop","output_version":"v1"},"tool_calls":[{"args":{"q":"berth"},"id":"<id 2>","name":"lookup","type":"tool_call"}],"type":"ai"}]}',
      'updates - tools {"messages":[{"content":"found berth","id":"<id 4>","name":"lookup","status":"success","tool_call_id":"call_lookup_1","type":"tool"}]}',
      'values - {"messages":[{"content":"look up berth","id":"<id 1>","type":"human"},{"content":[{"args":{"q":"berth"},"id":"<id 2>","name":"lookup","type":"tool_call"}],"id":"<id 3>","response_metadata":{"finish_reason":"stop","output_version":"v1"},"tool_calls":[{"args":{"q":"berth"},"id":"<id 2>","name":"lookup","type":"tool_call"}],"type":"ai"},{"content":"found berth","id":"<id 4>","name":"lookup","status":"success","tool_call_id":"call_lookup_1","type":"tool"}]}',
      'updates - model {"messages":[{"content":[{"text":"The answer: found berth","type":"text"}],"id":"<id 5>","response_metadata":{"finish_reason":"stop","output_version":"v1"},"type":"ai"}]}',
      'values - {"messages":[{"content":"look up berth","id":"<id 1>","type":"human"},{"content":[{"args":{"q":"berth"},"id":"<id 2>","name":"lookup","type":"tool_call"}],"id":"<id 3>","response_metadata":{"finish_reason":"stop","output_version":"v1"},"tool_calls":[{"args":{"q":"berth"},"id":"<id 2>","name":"lookup","type":"tool_call"}],"type":"ai"},{"content":"found berth","id":"<id 4>","name":"lookup","status":"success","tool_call_id":"call_lookup_1","type":"tool"},{"content":[{"text":"The answer: found berth","type":"text"}],"id":"<id 5>","response_metadata":{"finish_reason":"stop","output_version":"v1"},"type":"ai"}]}',
      'lifecycle - {"event":"completed","graph_name":"agent"}',
    ]);
    expect(ours).toEqual(reference);
  }, 60_000);

  it('an interrupt: input.requested, the run interrupted, input.respond resumes it on the same stream', async () => {
    const { reference, ours } = await recordBoth({
      assistant_id: 'ask',
      input: { steps: ['start'] },
      channels: ['values', 'updates', 'input', 'lifecycle'],
      respond: answer('Lisbon'),
    });
    expect(lines(reference.events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"ask"}',
      'values - {"steps":["start"]}',
      'updates - prepare {"steps":["prepare"]}',
      'values - {"steps":["start","prepare"]}',
      'input.requested - {"interrupt_id":"<id 1>","payload":{"question":"Which city?"}}',
      'lifecycle - {"event":"interrupted","graph_name":"ask"}',
      'lifecycle - {"event":"running","graph_name":"ask"}',
      'values - {"steps":["start","prepare"]}',
      'updates - ask {"answer":"going to Lisbon","steps":["ask"]}',
      'values - {"answer":"going to Lisbon","steps":["start","prepare","ask"]}',
      'lifecycle - {"event":"completed","graph_name":"ask"}',
    ]);
    expect(reference.responses.map((r) => (r as { body: unknown }).body)).toEqual([
      { type: 'success', id: 1, result: { run_id: '<id 2>' }, meta: { thread_id: '<id 3>', applied_through_seq: '<seq>' } },
      { type: 'success', id: 2, result: {}, meta: { thread_id: '<id 3>', applied_through_seq: '<seq>' } },
    ]);
    expect(withoutInputAnswered(ours)).toEqual(reference);
  }, 60_000);

  it('an interrupt in a subgraph: requested in the subgraph’s namespace, resumed from the root', async () => {
    const { reference, ours } = await recordBoth({
      assistant_id: 'nested_ask',
      input: { steps: ['start'] },
      channels: ['values', 'updates', 'input', 'lifecycle'],
      respond: answer('Porto'),
    });
    expect(lines(reference.events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"nested_ask"}',
      'values - {"steps":["start"]}',
      'updates - before {"steps":["before"]}',
      'values - {"steps":["start","before"]}',
      'lifecycle child:* {"event":"started","graph_name":"child"}',
      'input.requested child:* {"interrupt_id":"<id 1>","payload":{"question":"Which city?"}}',
      'lifecycle child:* {"event":"completed","graph_name":"child"}',
      'lifecycle - {"event":"interrupted","graph_name":"nested_ask"}',
      'lifecycle - {"event":"running","graph_name":"nested_ask"}',
      'values - {"steps":["start","before"]}',
      'lifecycle child:* {"event":"started","graph_name":"child"}',
      'updates child:* ask {"answer":"going to Porto"}',
      'values child:* {"answer":"going to Porto"}',
      'updates - child {"answer":"going to Porto"}',
      'lifecycle child:* {"event":"completed","graph_name":"child"}',
      'values - {"answer":"going to Porto","steps":["start","before"]}',
      'updates - after {"steps":["after going to Porto"]}',
      'values - {"answer":"going to Porto","steps":["start","before","after going to Porto"]}',
      'lifecycle - {"event":"completed","graph_name":"nested_ask"}',
    ]);
    expect(withoutInputAnswered(ours)).toEqual(reference);
  }, 60_000);

  it('subgraph namespaces two deep', async () => {
    const { reference, ours } = await recordBoth({ assistant_id: 'nest', input: { steps: ['start'] }, channels: ['values', 'updates', 'lifecycle'] });
    expect(lines(reference.events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"nest"}',
      'values - {"steps":["start"]}',
      'updates - prepare {"steps":["prepare"]}',
      'values - {"steps":["start","prepare"]}',
      'lifecycle child:* {"event":"started","graph_name":"child"}',
      'updates child:* inner {"trail":["inner"]}',
      'values child:* {"trail":["inner"]}',
      'lifecycle child:*/grandchild:* {"event":"started","graph_name":"grandchild"}',
      'values child:*/grandchild:* {"trail":["inner"]}',
      'updates child:*/grandchild:* leaf {"trail":["inner","leaf"]}',
      'values child:*/grandchild:* {"trail":["inner","leaf"]}',
      'updates child:* grandchild {"trail":["inner","leaf"]}',
      'lifecycle child:*/grandchild:* {"event":"completed","graph_name":"grandchild"}',
      'values child:* {"trail":["inner","leaf"]}',
      'updates - child {"trail":["inner","leaf"]}',
      'lifecycle child:* {"event":"completed","graph_name":"child"}',
      'values - {"steps":["start","prepare"],"trail":["inner","leaf"]}',
      'updates - summarize {"steps":["summary of 2"]}',
      'values - {"steps":["start","prepare","summary of 2"],"trail":["inner","leaf"]}',
      'lifecycle - {"event":"completed","graph_name":"nest"}',
    ]);
    expect(ours).toEqual(reference);
  }, 60_000);

  it('namespaces and depth: the root and one level below, not the grandchild', async () => {
    const { reference, ours } = await recordBoth({
      assistant_id: 'nest',
      input: { steps: ['start'] },
      channels: ['updates', 'lifecycle'],
      namespaces: [[]],
      depth: 1,
    });
    expect(lines(reference.events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"nest"}',
      'updates - prepare {"steps":["prepare"]}',
      'lifecycle child:* {"event":"started","graph_name":"child"}',
      'updates child:* inner {"trail":["inner"]}',
      'updates child:* grandchild {"trail":["inner","leaf"]}',
      'updates - child {"trail":["inner","leaf"]}',
      'lifecycle child:* {"event":"completed","graph_name":"child"}',
      'updates - summarize {"steps":["summary of 2"]}',
      'lifecycle - {"event":"completed","graph_name":"nest"}',
    ]);
    expect(ours).toEqual(reference);
  }, 60_000);

  it('replay after since: a second stream gets the events after that seq', async () => {
    const scenario: Scenario = { assistant_id: 'nest', input: { steps: ['start'] }, channels: ['updates', 'lifecycle'], replayAfter: 3 };
    const { reference, ours } = await recordBoth(scenario);
    expect(reference.replayed).toEqual(reference.events.slice(4));
    expect(ours).toEqual(reference);
  }, 60_000);

  it('every channel at once, an interrupt in a subgraph: checkpoints, tasks and input too', async () => {
    const channels = ['values', 'updates', 'messages', 'tools', 'lifecycle', 'checkpoints', 'input', 'tasks', 'custom'];
    const { reference, ours } = await recordBoth({ assistant_id: 'nested_ask', input: { steps: ['start'] }, channels, respond: answer('Porto') });
    expect(reference.events.map((e) => e.method).filter((m, i, all) => all.indexOf(m) === i)).toEqual([
      'lifecycle',
      'checkpoints',
      'values',
      'tasks',
      'updates',
      'input.requested',
    ]);
    expect(withoutInputAnswered(ours)).toEqual(withoutPlatformRunMetadata(reference));
  }, 60_000);

  it('over the WebSocket: the same sequences (messages; an interrupt answered on the socket)', async () => {
    const messages = await recordBoth({ assistant_id: 'agent', input: agentInput, channels: ['messages', 'tools', 'lifecycle'] }, 'websocket');
    expect(messages.reference.events.filter((e) => e.method === 'messages')).toHaveLength(16);
    expect(messages.ours).toEqual(withoutReplayCount(messages.reference));

    const ask = await recordBoth(
      { assistant_id: 'ask', input: { steps: ['start'] }, channels: ['values', 'updates', 'input', 'lifecycle'], respond: answer('Lisbon') },
      'websocket',
    );
    expect(ask.reference.events.at(-2)).toEqual({ method: 'values', namespace: [], data: { steps: ['start', 'prepare', 'ask'], answer: 'going to Lisbon' } });
    const meta = { thread_id: '<id 3>', applied_through_seq: '<seq>' };
    const subscribed = { body: { type: 'success', id: 0, result: { subscription_id: '<id 2>', replayed_events: 0 }, meta } };
    expect(ask.reference.responses).toEqual([
      subscribed,
      { body: { type: 'success', id: 1, result: { run_id: '<id 4>' }, meta } },
      { body: { type: 'success', id: 2, result: {}, meta } },
    ]);
    // The JS server answers the subscribe command again, with another subscription id, when the next
    // run (the answer) starts: it re-attaches the socket's subscriptions to each run's session. From
    // Berth a client gets one answer per command.
    const { repeated, ...reference } = ask.reference;
    expect(repeated).toEqual([{ body: { ...subscribed.body, result: { subscription_id: '<id 5>', replayed_events: 0 } } }]);
    expect(withoutInputAnswered(ask.ours)).toEqual(withoutReplayCount(reference));
  }, 60_000);

  it('custom events of the stream writer, and a run that fails', async () => {
    const custom = await recordBoth({ assistant_id: 'report', input: { steps: ['start'] }, channels: ['custom', 'lifecycle'] });
    expect(lines(custom.reference.events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"report"}',
      'custom - {"payload":{"of":2,"progress":1}}',
      'custom - {"payload":{"of":2,"progress":2}}',
      'lifecycle - {"event":"completed","graph_name":"report"}',
    ]);
    expect(custom.ours).toEqual(custom.reference);

    const failed = await recordBoth({ assistant_id: 'report', input: { steps: ['start'], fail: true }, channels: ['values', 'custom', 'lifecycle'] });
    expect(lines(failed.reference.events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"report"}',
      'values - {"fail":true,"steps":["start"]}',
      'custom - {"payload":{"of":2,"progress":1}}',
      'custom - {"payload":{"of":2,"progress":2}}',
      'lifecycle - {"error":"{\\"error\\":\\"Error\\",\\"message\\":\\"the report broke\\"}","event":"failed","graph_name":"report"}',
    ]);
    // The protocol's `error` is a string; the JS server's is its error object ({error, message})
    // JSON-encoded a second time (it serialises the run's already serialised error). Berth sends the
    // message.
    const jsError = JSON.parse((failed.reference.events.at(-1)!.data as { error: string }).error) as { message: string };
    expect(failed.ours.events.at(-1)).toEqual({ method: 'lifecycle', namespace: [], data: { event: 'failed', graph_name: 'report', error: jsError.message } });
    expect(failed.ours.events.slice(0, -1)).toEqual(failed.reference.events.slice(0, -1));
    expect(failed.ours.responses).toEqual(failed.reference.responses);
  }, 60_000);

  it('two interrupts at once answered in one input.respond (responses[]) with an update', async () => {
    const respond = (requested: { interrupt_id: string; payload: unknown }[]) => ({
      responses: requested.map(({ interrupt_id, payload }) => ({ interrupt_id, response: payload === 'left?' ? 'L' : 'R' })),
      update: { steps: ['updated'] },
    });
    const { reference, ours } = await recordBoth({
      assistant_id: 'pair',
      input: { steps: ['start'] },
      channels: ['values', 'updates', 'input', 'lifecycle'],
      respond,
    });
    expect(lines(reference.events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"pair"}',
      'values - {"steps":["start"]}',
      'input.requested - {"interrupt_id":"<id 1>","payload":"left?"}',
      'input.requested - {"interrupt_id":"<id 2>","payload":"right?"}',
      'lifecycle - {"event":"interrupted","graph_name":"pair"}',
      'lifecycle - {"event":"running","graph_name":"pair"}',
      'values - {"steps":["start","updated"]}',
      'updates - left {"steps":["left L"]}',
      'updates - right {"steps":["right R"]}',
      'values - {"steps":["start","updated","left L","right R"]}',
      'updates - join {"steps":["join"]}',
      'values - {"steps":["start","updated","left L","right R","join"]}',
      'lifecycle - {"event":"completed","graph_name":"pair"}',
    ]);
    expect(withoutInputAnswered(ours)).toEqual(reference);
  }, 60_000);

  it('a stream stays open across runs: a second run.start on the thread, then state.get', async () => {
    const scenario: Scenario = {
      assistant_id: 'steps',
      input: { steps: ['start'] },
      again: () => ({ input: { steps: ['again'] } }),
      channels: ['values', 'lifecycle'],
      after: [{ method: 'state.get', params: {} }],
    };
    const { reference, ours } = await recordBoth(scenario);
    expect(lines(reference.events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"steps"}',
      'values - {"steps":["start"]}',
      'values - {"steps":["start","first"]}',
      'values - {"steps":["start","first","second"]}',
      'lifecycle - {"event":"completed","graph_name":"steps"}',
      'lifecycle - {"event":"running","graph_name":"steps"}',
      'values - {"steps":["start","first","second","again"]}',
      'values - {"steps":["start","first","second","again","first"]}',
      'values - {"steps":["start","first","second","again","first","second"]}',
      'lifecycle - {"event":"completed","graph_name":"steps"}',
    ]);
    const meta = { thread_id: '<id 2>', applied_through_seq: '<seq>' };
    expect(reference.responses.map((r) => (r as { body: unknown }).body)).toEqual([
      { type: 'success', id: 1, result: { run_id: '<id 1>' }, meta },
      { type: 'success', id: 2, result: { run_id: '<id 3>' }, meta },
      {
        type: 'success',
        id: 3,
        result: { values: { steps: ['start', 'first', 'second', 'again', 'first', 'second'] }, checkpoint: { id: '<id 4>', ns: '' } },
        meta,
      },
    ]);
    expect(ours).toEqual(reference);
  }, 60_000);

  it('bad commands get the same error codes', async () => {
    const commands = [
      { method: 'run.start', params: {} },
      { method: 'input.respond', params: { response: 'x' } },
      { method: 'input.respond', params: { interrupt_id: 'nope', response: 'x' } },
      { method: 'nope.nothing' },
    ];
    const reference = await commandAnswers(js.url, commands);
    const error = (id: number, code: string) => ({ status: 200, type: 'error', id, error: code });
    expect(reference).toEqual([error(1, 'invalid_argument'), error(2, 'invalid_argument'), error(3, 'no_such_run'), error(4, 'no_such_run')]);
    // A method no server knows: the JS server forwards what it does not handle itself to the thread's
    // run session, and answers no_such_run while there is none (unknown_command once there is). Berth
    // answers unknown_command either way.
    expect(await commandAnswers(berth.url, commands)).toEqual([...reference.slice(0, 3), error(4, 'unknown_command')]);
  }, 60_000);

  it('a fork: run.start from an earlier checkpoint (config.configurable.checkpoint_id) on the same stream', async () => {
    // The checkpoint after `first` (step 1), as its `checkpoints` event named it.
    const fromFirst = (events: RecordedEvent[]) => {
      const checkpoint = events.find((e) => e.method === 'checkpoints' && (e.data as { step: number }).step === 1)!.data as { id: string };
      return { input: { steps: ['forked'] }, config: { configurable: { checkpoint_id: checkpoint.id } } };
    };
    const { reference, ours } = await recordBoth({
      assistant_id: 'steps',
      input: { steps: ['start'] },
      again: fromFirst,
      channels: ['values', 'checkpoints', 'lifecycle'],
    });
    // The forked run's checkpoints continue from the one it forked from: their parent is the
    // checkpoint written for its input on top of that one (<id 6>), which no event names.
    expect(lines(reference.events)).toEqual([
      'lifecycle - {"event":"running","graph_name":"steps"}',
      'checkpoints - {"id":"<id 1>","parent_id":"<id 2>","source":"loop","step":0}',
      'values - {"steps":["start"]}',
      'checkpoints - {"id":"<id 3>","parent_id":"<id 1>","source":"loop","step":1}',
      'values - {"steps":["start","first"]}',
      'checkpoints - {"id":"<id 4>","parent_id":"<id 3>","source":"loop","step":2}',
      'values - {"steps":["start","first","second"]}',
      'lifecycle - {"event":"completed","graph_name":"steps"}',
      'lifecycle - {"event":"running","graph_name":"steps"}',
      'checkpoints - {"id":"<id 5>","parent_id":"<id 6>","source":"loop","step":3}',
      'values - {"steps":["start","first","forked"]}',
      'checkpoints - {"id":"<id 7>","parent_id":"<id 5>","source":"loop","step":4}',
      'values - {"steps":["start","first","forked","first"]}',
      'checkpoints - {"id":"<id 8>","parent_id":"<id 7>","source":"loop","step":5}',
      'values - {"steps":["start","first","forked","first","second"]}',
      'lifecycle - {"event":"completed","graph_name":"steps"}',
    ]);
    expect(ours).toEqual(reference);
  }, 60_000);

  it('a model and a tool inside a subgraph: messages and tools one namespace deeper', async () => {
    const { reference, ours } = await recordBoth({ assistant_id: 'team', input: agentInput, channels: ['messages', 'tools', 'lifecycle'] });
    // Pinned by kind (the payloads are those of the flat `agent` above, compared in full below).
    const kinds = reference.events.map((e) => `${e.method} ${e.namespace.join('/')} ${(e.data as { event: string }).event}`);
    const model = (blocks: string[]) => [
      'lifecycle researcher:*/model:* started',
      'messages researcher:*/model:* message-start',
      ...blocks.map((event) => `messages researcher:*/model:* ${event}`),
      'messages researcher:*/model:* message-finish',
      'lifecycle researcher:*/model:* completed',
    ];
    expect(kinds).toEqual([
      'lifecycle  running',
      'lifecycle researcher:* started',
      ...model(['content-block-start', 'content-block-delta', 'content-block-delta', 'content-block-finish']),
      'lifecycle researcher:*/tools:* started',
      'tools researcher:*/tools:* tool-started',
      'tools researcher:*/tools:* tool-finished',
      'lifecycle researcher:*/tools:* completed',
      ...model(['content-block-start', ...Array<string>(5).fill('content-block-delta'), 'usage', 'content-block-finish']),
      'lifecycle researcher:* completed',
      'lifecycle  completed',
    ]);
    expect(ours).toEqual(reference);
  }, 60_000);

  it('commands on a thread with a run: the same answers, but state.listCheckpoints, which only Berth has', async () => {
    const commands = [
      { method: 'run.start', params: { assistant_id: 'steps', input: { steps: ['start'] } } },
      { method: 'agent.getTree', params: {} },
      { method: 'state.listCheckpoints', params: {} },
      // Over HTTP there is no subscription to reconnect (Berth's works on the WebSocket).
      { method: 'subscription.reconnect', params: {} },
      { method: 'nope.nothing' },
    ];
    const reference = await commandAnswers(js.url, commands);
    const success = (id: number) => ({ status: 200, type: 'success', id });
    const error = (id: number, code: string) => ({ status: 200, type: 'error', id, error: code });
    expect(reference).toEqual([success(1), success(2), error(3, 'unknown_command'), error(4, 'not_supported'), error(5, 'unknown_command')]);
    // Issue 25 asks for state.listCheckpoints (the JS server 1.5.1 forwards it to the run's session, which does not know it).
    expect(await commandAnswers(berth.url, commands)).toEqual([success(1), success(2), success(3), error(4, 'not_supported'), error(5, 'unknown_command')]);
  }, 60_000);
});
