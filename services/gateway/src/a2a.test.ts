/**
 * A2A through the deployment URL: the official JS client (`@a2a-js/sdk`) with an API key finds
 * the agent card at `{gateway}/d/{id}/a2a/{assistant}/.well-known/agent-card.json`, whose interface
 * URL is the deployment's public one (the gateway's x-forwarded-* headers), and sends and streams
 * messages there, against a real agent server behind a real gateway.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { TaskState } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { startAgentStack, type AgentStack } from './__tests__/agent-stack.js';
// The agent runtime's own A2A test helpers, reused rather than copied.
import { userText } from '../../agent-runtime/src/__tests__/a2a.js';

let db: TestDatabase;
let stack: AgentStack;

beforeAll(async () => {
  db = await createTestDatabase('gw_a2a');
  stack = await startAgentStack(db.url);
}, 90_000);
afterAll(async () => {
  await stack?.close();
  await db?.drop();
});

/** A client of the deployment's `echo` assistant sending `headers` with every request (card included). */
function clientOf(headers: Record<string, string>): Promise<Client> {
  const fetchImpl: typeof fetch = (url, init) => fetch(url, { ...init, headers: { ...(init?.headers as Record<string, string>), ...headers } });
  return new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  }).createFromUrl(`${stack.deploymentUrl}/a2a/echo/`);
}

describe('A2A through the gateway', () => {
  it('serves the card with the deployment URL, and runs messages sent there', async () => {
    const client = await clientOf({ 'x-api-key': stack.key });
    const card = await client.getAgentCard();
    expect(card.supportedInterfaces[0]).toMatchObject({ url: `${stack.deploymentUrl}/a2a/echo`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' });

    const task = await client.sendMessage({ tenant: '', message: userText('via the gateway'), configuration: undefined, metadata: undefined });
    expect(task).toMatchObject({
      status: { state: TaskState.TASK_STATE_COMPLETED },
      artifacts: [{ parts: [{ content: { $case: 'text', value: 'echo: via the gateway' } }] }],
    });

    const events = [];
    for await (const event of client.sendMessageStream({ tenant: '', message: userText('streamed'), configuration: undefined, metadata: undefined }))
      events.push(event.payload);
    expect(events[0]?.$case).toBe('task');
    expect(events.at(-1)).toMatchObject({ $case: 'statusUpdate', value: { status: { state: TaskState.TASK_STATE_COMPLETED } } });
  });

  it('refuses the card and the endpoint without an API key', async () => {
    expect((await fetch(`${stack.deploymentUrl}/a2a/echo/.well-known/agent-card.json`)).status).toBe(401);
    const res = await fetch(`${stack.deploymentUrl}/a2a/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}',
    });
    expect(res.status).toBe(401);
  });
});
