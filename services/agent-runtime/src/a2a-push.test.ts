/**
 * A2A push notifications against a real receiver on 127.0.0.1 (allowed here as `berth dev` allows
 * loopback): configs set with a message or later (1.0 and 0.3 methods, through `@a2a-js/sdk`),
 * each delivered when its task's run ends, signed as run webhooks are (checked by a verifier
 * written from the Standard Webhooks spec) and carrying the config's token; and the receivers the
 * egress policy refuses.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Role, TaskState, type Message, type Task, type TaskPushNotificationConfig } from '@a2a-js/sdk';
import { ClientFactory, type Client } from '@a2a-js/sdk/client';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import { startTestServer, until } from './__tests__/fixtures.js';
import { asTask, userText } from './__tests__/a2a.js';
import { Receiver, verify, type Received } from './__tests__/webhook-receiver.js';
import { generateWebhookSecret } from '@berth/agent-contract';

const project = fileURLToPath(new URL('../test-projects/a2a/langgraph.json', import.meta.url));
const secret = generateWebhookSecret();

let db: TestDatabase;
let server: RunningAgentServer;
let publicOnly: RunningAgentServer;
const receiver = new Receiver();

beforeAll(async () => {
  db = await createTestDatabase('agenta2apush');
  await receiver.start();
  server = await startTestServer(db.url, {
    configPath: project,
    webhooks: { secret, privateEgress: ['127.0.0.0/8'], timeoutMs: 2000, attempts: 2, backoffMs: 100 },
  });
  publicOnly = await startTestServer(db.url, { configPath: project, schema: 'agent_public', workers: 0, webhooks: { secret } });
}, 90_000);
afterAll(async () => {
  await server?.close();
  await publicOnly?.close();
  await receiver.close();
  await db?.drop();
});

const clientOf = (assistant: string, on = server): Promise<Client> => new ClientFactory().createFromUrl(`${on.url}/a2a/${assistant}/`);
const pushConfig = (url: string, token = '', taskId = ''): TaskPushNotificationConfig => ({
  tenant: '',
  id: '',
  taskId,
  url,
  token,
  authentication: undefined,
});
/** Waits for `count` requests at the receiver's `path`. */
const arrived = (path: string, count = 1): Promise<Received[]> =>
  until(
    async () => receiver.requests(path),
    (list) => list.length >= count,
    20_000,
  );

async function rpc(assistant: string, method: string, params: unknown, on = server) {
  const res = await fetch(`${on.url}/a2a/${assistant}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return (await res.json()) as { result?: any; error?: { code: number; message: string; data?: any } };
}

describe('push notifications', () => {
  it('are advertised in the card', async () => {
    await expect((await clientOf('echo')).getAgentCard()).resolves.toMatchObject({ capabilities: { pushNotifications: true } });
  });

  it('deliver the finished task, signed and with the token, to the config set with the message', async () => {
    const url = receiver.script('/sent-with-message', [200]);
    const client = await clientOf('echo');
    const task = asTask(
      await client.sendMessage({
        tenant: '',
        message: userText('notify me'),
        metadata: undefined,
        configuration: { acceptedOutputModes: [], taskPushNotificationConfig: pushConfig(url, 'tok-123'), returnImmediately: false },
      }),
    );
    const [request] = await arrived('/sent-with-message');
    expect(verify(secret, request!.headers, request!.body)).toBe(true);
    expect(verify(generateWebhookSecret(), request!.headers, request!.body)).toBe(false);
    expect(request!.headers['x-a2a-notification-token']).toBe('tok-123');
    // A 1.0 config gets a StreamResponse: the task, in 1.0 shapes, and nothing else.
    const body = JSON.parse(request!.body) as Record<string, any>;
    expect(Object.keys(body)).toEqual(['task']);
    expect(body.task).toMatchObject({
      id: task.id,
      contextId: task.contextId,
      status: { state: 'TASK_STATE_COMPLETED' },
      artifacts: [{ parts: [{ text: 'echo: notify me' }] }],
    });

    const [config] = (await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' })).configs;
    expect(config).toMatchObject({ taskId: task.id, url, token: 'tok-123' });
  });

  it('are set, read, listed and deleted on a running task (1.0), and sent when it ends', async () => {
    const client = await clientOf('slow');
    const task = asTask(
      await client.sendMessage({
        tenant: '',
        message: userText('wait 60000'),
        metadata: undefined,
        configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true },
      }),
    );
    const kept = await client.createTaskPushNotificationConfig({ ...pushConfig(receiver.script('/kept', [200]), 'k'), taskId: task.id, id: 'kept' });
    const dropped = await client.createTaskPushNotificationConfig(pushConfig(receiver.script('/dropped', [200]), '', task.id));
    expect(kept).toMatchObject({ id: 'kept', taskId: task.id });
    expect(dropped.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(await client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'kept' })).toMatchObject({ url: `${receiver.url}/kept`, token: 'k' });
    expect((await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' })).configs.map((c) => c.id).sort()).toEqual(
      [dropped.id, 'kept'].sort(),
    );
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: dropped.id });
    expect((await rpc('slow', 'GetTaskPushNotificationConfig', { taskId: task.id, id: dropped.id })).error?.code).toBe(-32602);

    await client.cancelTask({ tenant: '', id: task.id, metadata: undefined });
    const [request] = await arrived('/kept');
    expect(JSON.parse(request!.body)).toMatchObject({ task: { id: task.id, status: { state: 'TASK_STATE_CANCELED' } } });
    // The deleted config got nothing (its delivery would have been queued with the other's).
    expect(receiver.requests('/dropped')).toEqual([]);
  });

  it('speak 0.3 to a config set with a 0.3 method, and report input-required', async () => {
    const sent = await rpc('approve', 'message/send', {
      message: { kind: 'message', messageId: 'm1', role: 'user', parts: [{ kind: 'text', text: 'release' }] },
      configuration: { pushNotificationConfig: { id: 'old', url: receiver.script('/legacy', [200]), token: 't03' } },
    });
    const taskId = sent.result.id as string;
    const [request] = await arrived('/legacy');
    expect(request!.headers['x-a2a-notification-token']).toBe('t03');
    expect(JSON.parse(request!.body)).toMatchObject({
      kind: 'task',
      id: taskId,
      status: { state: 'input-required', message: { kind: 'message', role: 'agent', parts: [{ kind: 'text', text: 'Approve "release"?' }] } },
    });
    const config = { taskId, pushNotificationConfig: { id: 'old', url: `${receiver.url}/legacy`, token: 't03' } };
    expect((await rpc('approve', 'tasks/pushNotificationConfig/get', { id: taskId, pushNotificationConfigId: 'old' })).result).toEqual(config);
    expect((await rpc('approve', 'tasks/pushNotificationConfig/list', { id: taskId })).result).toEqual([config]);
    expect((await rpc('approve', 'tasks/pushNotificationConfig/delete', { id: taskId, pushNotificationConfigId: 'old' })).result).toBeNull();
    expect((await rpc('approve', 'tasks/pushNotificationConfig/list', { id: taskId })).result).toEqual([]);

    // Set on a running task, with tasks/pushNotificationConfig/set.
    const running = await rpc('slow', 'message/send', {
      message: { kind: 'message', messageId: 'm2', role: 'user', parts: [{ kind: 'text', text: 'wait 60000' }] },
      configuration: { blocking: false },
    });
    const set = await rpc('slow', 'tasks/pushNotificationConfig/set', {
      taskId: running.result.id,
      pushNotificationConfig: { url: receiver.script('/legacy-set', [200]) },
    });
    expect(set.result).toMatchObject({ taskId: running.result.id, pushNotificationConfig: { id: expect.any(String), url: `${receiver.url}/legacy-set` } });
    await rpc('slow', 'tasks/cancel', { id: running.result.id });
    const [cancelled] = await arrived('/legacy-set');
    expect(JSON.parse(cancelled!.body)).toMatchObject({ kind: 'task', id: running.result.id, status: { state: 'canceled' } });
    expect(cancelled!.headers['x-a2a-notification-token']).toBeUndefined();
  });

  it('are refused for receivers at private addresses when private egress is off, and for what cannot be kept safely', async () => {
    const client = await clientOf('echo', publicOnly);
    for (const url of [`${receiver.url}/private`, 'http://10.1.2.3/hook', 'http://[::1]:9/hook', 'http://169.254.169.254/latest']) {
      const answer = await rpc(
        'echo',
        'SendMessage',
        { message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'x' }] }, configuration: { taskPushNotificationConfig: { url } } },
        publicOnly,
      );
      expect(answer.error).toMatchObject({ code: -32602, message: expect.stringMatching(/BERTH_WEBHOOK_PRIVATE_EGRESS/), data: { url } });
    }
    // Refused before any run started.
    const listed = await client.listTasks({
      tenant: '',
      contextId: '',
      status: TaskState.TASK_STATE_UNSPECIFIED,
      pageToken: '',
      statusTimestampAfter: undefined,
    });
    expect(listed.tasks).toEqual([]);
    const refusals = await Promise.all([
      rpc('echo', 'CreateTaskPushNotificationConfig', { taskId: randomUUID(), url: 'https://example.com/h' }),
      rpc('echo', 'SendMessage', {
        message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'x' }] },
        configuration: { taskPushNotificationConfig: { url: 'ftp://example.com/h' } },
      }),
      rpc('echo', 'SendMessage', {
        message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'x' }] },
        configuration: { taskPushNotificationConfig: { url: 'https://example.com/h', authentication: { scheme: 'Bearer', credentials: 'secret' } } },
      }),
    ]);
    expect(refusals.map((r) => r.error?.code)).toEqual([-32001, -32602, -32602]);
  });

  it('are at most ten per task', async () => {
    const task = asTask(
      await (await clientOf('approve')).sendMessage({ tenant: '', message: userText('limits'), metadata: undefined, configuration: undefined }),
    );
    const url = receiver.script('/limit', [200]);
    for (let i = 0; i < 10; i += 1)
      expect((await rpc('approve', 'CreateTaskPushNotificationConfig', { taskId: task.id, id: `c${i}`, url })).error).toBeUndefined();
    // Replacing one is not adding one.
    expect((await rpc('approve', 'CreateTaskPushNotificationConfig', { taskId: task.id, id: 'c3', url: `${url}?v=2` })).result).toMatchObject({
      id: 'c3',
      url: `${url}?v=2`,
    });
    expect((await rpc('approve', 'CreateTaskPushNotificationConfig', { taskId: task.id, url })).error).toMatchObject({ code: -32602, data: { limit: 10 } });
  });
});
