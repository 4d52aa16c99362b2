/**
 * A2A (Agent2Agent) over JSON-RPC 2.0 on every assistant: `POST /a2a/{assistant_id}` and its agent
 * card. Methods of A2A 1.0 and their 0.3 names; the method's family decides the wire shapes of the
 * answer (see wire.ts), and an `A2A-Version` header naming the other family (or another version)
 * is refused with -32009. Authentication is the Api's (custom auth included); a message runs as
 * the user (`threads:create_run`), reading a task is `threads:read`, cancelling it and its push
 * configs `threads:update`, listing tasks `threads:search`, the card `assistants:read`.
 */
import type { Request, Response } from 'express';
import { z } from 'zod';
import type { Api } from '@berth/http';
import { isUuid } from '@berth/ids';
import { SseWriter } from '@berth/http';
import type { RequestAuth } from '../auth/index.js';
import type { ServerContext } from '../api/context.js';
import {
  errorAnswer,
  errorAnswerFor,
  INVALID_PARAMS,
  INVALID_REQUEST,
  JsonRpcError,
  jsonRpcParseErrors,
  METHOD_NOT_FOUND,
  type JsonRpcId,
} from '../api/json-rpc.js';
import type { Assistant } from '../storage/assistants.js';
import type { RunStatus } from '../storage/runs.js';
import { agentCard, etagOf } from './card.js';
import { unsupported, VERSION_NOT_SUPPORTED, pushNotSupported } from './errors.js';
import type { A2aPush, PushConfigInput } from './push.js';
import { A2aTasks, isFinal, type Caller, type SendOptions } from './service.js';
import { A2aStore } from './store.js';
import { taskOf } from './tasks.js';
import { eventWire, MessageIn, parseParams, pushConfigWire, readMessage, taskWire, type TaskState, type Version } from './wire.js';
import type { AgentApi } from '../api/access.js';

/** The 1.0 method of each 0.3 method name. */
const V03_NAMES: Record<string, string> = {
  'message/send': 'SendMessage',
  'message/stream': 'SendStreamingMessage',
  'tasks/get': 'GetTask',
  'tasks/cancel': 'CancelTask',
  'tasks/resubscribe': 'SubscribeToTask',
  'agent/getAuthenticatedExtendedCard': 'GetExtendedAgentCard',
  'tasks/pushNotificationConfig/set': 'CreateTaskPushNotificationConfig',
  'tasks/pushNotificationConfig/get': 'GetTaskPushNotificationConfig',
  'tasks/pushNotificationConfig/list': 'ListTaskPushNotificationConfigs',
  'tasks/pushNotificationConfig/delete': 'DeleteTaskPushNotificationConfig',
};
const V10_NAMES = new Set([...Object.values(V03_NAMES), 'ListTasks']);
const STREAMING = new Set(['SendStreamingMessage', 'SubscribeToTask']);

/** What the card routes answer, for the OpenAPI document (the handlers write it, with its ETag). */
const AgentCardJson = z.record(z.string(), z.unknown());

/** ListTasks pages: the spec's default and bounds. */
const PAGE_SIZE = { default: 50, max: 100 };

const tenant = z.string().optional();
const meta = z.record(z.string(), z.unknown()).optional();
const historyLength = z.number().int().min(0).optional();
const PushConfigIn = z.strictObject({
  id: z.string().min(1).max(200).optional(),
  url: z.string().min(1).max(2048),
  token: z.string().max(4096).optional(),
  authentication: z.unknown().optional(),
});
const SendParams = {
  '1.0': z.strictObject({
    tenant,
    message: MessageIn,
    configuration: z
      .strictObject({
        acceptedOutputModes: z.array(z.string()).optional(),
        taskPushNotificationConfig: PushConfigIn.extend({ taskId: z.string().optional(), tenant }).optional(),
        historyLength,
        returnImmediately: z.boolean().optional(),
      })
      .optional(),
    metadata: meta,
  }),
  '0.3': z.strictObject({
    message: MessageIn,
    configuration: z
      .strictObject({
        acceptedOutputModes: z.array(z.string()).optional(),
        pushNotificationConfig: PushConfigIn.optional(),
        historyLength,
        blocking: z.boolean().optional(),
      })
      .optional(),
    metadata: meta,
  }),
};
const TaskIdParams = z.strictObject({ id: z.string(), historyLength, metadata: meta, tenant });
const ListParams = z.strictObject({
  tenant,
  contextId: z.string().optional(),
  status: z.string().optional(),
  pageSize: z.number().int().min(1).max(PAGE_SIZE.max).optional(),
  pageToken: z.string().optional(),
  historyLength,
  statusTimestampAfter: z.iso.datetime({ offset: true }).optional(),
  includeArtifacts: z.boolean().optional(),
});
const PushParams = {
  create: { '1.0': PushConfigIn.extend({ taskId: z.string(), tenant }), '0.3': z.strictObject({ taskId: z.string(), pushNotificationConfig: PushConfigIn }) },
  one: {
    '1.0': z.strictObject({ taskId: z.string(), id: z.string(), tenant }),
    '0.3': z.strictObject({ id: z.string(), pushNotificationConfigId: z.string().optional(), metadata: meta }),
  },
  list: {
    '1.0': z.strictObject({ taskId: z.string(), pageSize: z.number().int().min(1).optional(), pageToken: z.string().optional(), tenant }),
    '0.3': z.strictObject({ id: z.string(), metadata: meta }),
  },
};

/** Run statuses a task state may come from (ListTasks' `status` filter). */
const RUN_STATUSES: Record<TaskState, RunStatus[]> = {
  submitted: ['pending'],
  working: ['running'],
  completed: ['success'],
  'input-required': ['success'],
  canceled: ['interrupted'],
  failed: ['error', 'timeout'],
  rejected: [],
  'auth-required': [],
};

/** A state as a client names it: `TASK_STATE_INPUT_REQUIRED` or `input-required`. */
function readState(name: string): TaskState | undefined {
  const state = name
    .replace(/^TASK_STATE_/, '')
    .toLowerCase()
    .replace('_', '-');
  return state in RUN_STATUSES ? (state as TaskState) : undefined;
}

/** The version an `A2A-Version` header names (major.minor), undefined without one. */
function headerVersion(req: Request): string | undefined {
  const header = req.headers['a2a-version'];
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return undefined;
  const match = /^(\d+)(?:\.(\d+))?(?:\.\d+)?$/.exec(value);
  return match ? `${Number(match[1])}.${Number(match[2] ?? 0)}` : value;
}

export interface A2aOptions {
  /** The project's graph descriptions (`graphs.<id>.description`), for cards. */
  graphDescriptions: ReadonlyMap<string, string | undefined>;
  /** Push notification configs and their deliveries; unset: push is not supported (-32003). */
  push?: A2aPush;
  store: A2aStore;
}

/** Answers a body that is not JSON with a JSON-RPC parse error on the A2A endpoints. */
export const a2aParseErrors = () => jsonRpcParseErrors(/^\/a2a\/[^/]+\/?$/);

export function a2aRoutes(api: AgentApi, ctx: ServerContext, options: A2aOptions): void {
  const tasks = new A2aTasks(ctx);
  const tags = ['a2a'];

  const readable = async (auth: RequestAuth, ref: string) =>
    ctx.resolveAssistant(ref, (await ctx.authz.authorize(auth, 'assistants:read', { assistant_id: ref })).filter);
  const cardOf = (req: Request, ref: string, assistant: Assistant, version: Version | 'both') =>
    agentCard(
      req,
      ref,
      assistant,
      { graphDescription: options.graphDescriptions.get(assistant.graph_id), pushNotifications: options.push !== undefined },
      version,
    );

  /** The card as JSON, with validators and caching headers; 304 when the client has it. */
  function sendCard(req: Request, res: Response, card: Record<string, unknown>): void {
    const body = JSON.stringify(card);
    const etag = etagOf(body);
    res.setHeader('Cache-Control', 'private, max-age=300, must-revalidate');
    res.setHeader('ETag', etag);
    res.vary('A2A-Version').vary('X-Forwarded-Host').vary('X-Forwarded-Proto').vary('X-Forwarded-Prefix');
    if (req.headers['if-none-match'] === etag) {
      res.status(304).end();
      return;
    }
    res.status(200).type('application/json').send(body);
  }
  const cardVersion = (req: Request): Version | 'both' => {
    const asked = headerVersion(req);
    return asked === '0.3' ? '0.3' : asked === '1.0' ? '1.0' : 'both';
  };

  /** What a SendMessage's configuration asks for; its push config checked and set before the run starts. */
  async function sendOptions(version: Version, p: z.output<(typeof SendParams)[Version]>): Promise<SendOptions> {
    const config = p.configuration as
      | {
          returnImmediately?: boolean;
          blocking?: boolean;
          historyLength?: number;
          taskPushNotificationConfig?: PushConfigInput;
          pushNotificationConfig?: PushConfigInput;
        }
      | undefined;
    const push = config?.taskPushNotificationConfig ?? config?.pushNotificationConfig;
    if (push && !options.push) throw pushNotSupported();
    if (push) await options.push!.check(push);
    return {
      returnImmediately: config?.returnImmediately ?? config?.blocking === false,
      ...(config?.historyLength !== undefined ? { historyLength: config.historyLength } : {}),
      ...(push
        ? { beforeRun: (taskId, contextId) => options.push!.create(taskId, contextId, push, version), runFailed: (taskId) => options.push!.deleteAll(taskId) }
        : {}),
    };
  }

  async function sendMessage(caller: Caller, version: Version, params: unknown, method: string) {
    const p = parseParams(SendParams[version], params, method);
    const { task } = await tasks.send(caller, readMessage(p.message), await sendOptions(version, p));
    return version === '1.0' ? { task: taskWire(task, version) } : taskWire(task, version);
  }

  async function listTasks(caller: Caller, params: unknown, method: string) {
    const p = parseParams(ListParams, params, method);
    const state = p.status === undefined || p.status === '' || p.status === 'TASK_STATE_UNSPECIFIED' ? undefined : readState(p.status);
    if (p.status && p.status !== 'TASK_STATE_UNSPECIFIED' && !state)
      throw new JsonRpcError(INVALID_PARAMS, `Invalid params for ${method}: status ${p.status} is not a task state`, { status: p.status });
    const offset = p.pageToken ? Number.parseInt(Buffer.from(p.pageToken, 'base64url').toString(), 10) : 0;
    if (!Number.isSafeInteger(offset) || offset < 0)
      throw new JsonRpcError(INVALID_PARAMS, 'pageToken is not one this server gave', { pageToken: p.pageToken });
    const limit = p.pageSize ?? PAGE_SIZE.default;
    const { filter } = await ctx.authz.authorize(caller.auth, 'threads:search', { ...(p.contextId ? { thread_id: p.contextId } : {}), limit, offset });
    if (p.contextId !== undefined && !isUuid(p.contextId))
      throw new JsonRpcError(INVALID_PARAMS, 'contextId must be a UUID (it names the thread)', { contextId: p.contextId });
    const { views, total } = await options.store.listTasks({
      assistantId: caller.assistant.assistant_id,
      ...(p.contextId ? { threadId: p.contextId } : {}),
      ...(state ? { statuses: RUN_STATUSES[state] } : {}),
      ...(p.statusTimestampAfter ? { updatedAfter: new Date(p.statusTimestampAfter) } : {}),
      ...(filter ? { filter } : {}),
      limit,
      offset,
    });
    const found = views
      .map((view) => taskOf(view, { ...(p.historyLength !== undefined ? { historyLength: p.historyLength } : {}), artifacts: p.includeArtifacts ?? false }))
      .filter((task) => !state || task.status.state === state);
    const next = offset + views.length < total ? Buffer.from(String(offset + views.length)).toString('base64url') : '';
    return { tasks: found.map((task) => taskWire(task, '1.0')), nextPageToken: next, pageSize: limit, totalSize: total };
  }

  async function pushMethod(caller: Caller, version: Version, name: string, params: unknown, method: string): Promise<unknown> {
    const push = options.push;
    if (!push) throw pushNotSupported();
    switch (name) {
      case 'CreateTaskPushNotificationConfig': {
        const p = parseParams(PushParams.create[version], params, method);
        const { taskId, ...config } = 'pushNotificationConfig' in p ? { taskId: p.taskId, ...p.pushNotificationConfig } : p;
        const run = await tasks.find(caller, taskId, 'threads:update');
        await push.check(config);
        return pushConfigWire(await push.create(run.run_id, run.thread_id, config, version), version);
      }
      case 'GetTaskPushNotificationConfig': {
        const p = parseParams(PushParams.one[version], params, method);
        const [taskId, id] = 'taskId' in p ? [p.taskId, p.id] : [p.id, p.pushNotificationConfigId];
        const run = await tasks.find(caller, taskId);
        return pushConfigWire(await push.get(run.run_id, id), version);
      }
      case 'ListTaskPushNotificationConfigs': {
        const p = parseParams(PushParams.list[version], params, method);
        const run = await tasks.find(caller, 'taskId' in p ? p.taskId : p.id);
        const configs = (await push.list(run.run_id)).map((c) => pushConfigWire(c, version));
        return version === '1.0' ? { configs, nextPageToken: '' } : configs;
      }
      default: {
        const p = parseParams(PushParams.one[version], params, method);
        const [taskId, id] = 'taskId' in p ? [p.taskId, p.id] : [p.id, p.pushNotificationConfigId];
        if (id === undefined) throw new JsonRpcError(INVALID_PARAMS, `${method} needs params.pushNotificationConfigId`);
        const run = await tasks.find(caller, taskId, 'threads:update');
        await push.delete(run.run_id, id);
        return version === '1.0' ? {} : null;
      }
    }
  }

  /** A method answered with one JSON result. */
  async function answer(caller: Caller, version: Version, name: string, params: unknown, method: string): Promise<unknown> {
    switch (name) {
      case 'SendMessage':
        return sendMessage(caller, version, params, method);
      case 'GetTask': {
        const p = parseParams(TaskIdParams, params, method);
        const run = await tasks.find(caller, p.id);
        return taskWire(await tasks.task(run, p.historyLength !== undefined ? { historyLength: p.historyLength } : {}), version);
      }
      case 'CancelTask': {
        const p = parseParams(TaskIdParams, params, method);
        return taskWire(await tasks.cancel(caller, p.id), version);
      }
      case 'ListTasks':
        return listTasks(caller, params, method);
      case 'GetExtendedAgentCard':
        parseParams(z.strictObject({ tenant, metadata: meta }).optional(), params, method);
        return cardOf(caller.req, String(caller.req.params.assistant_id), caller.assistant, version);
      default:
        return pushMethod(caller, version, name, params, method);
    }
  }

  /** A streaming method: SSE of JSON-RPC responses, one per event, ending with the task's final status. */
  async function stream(caller: Caller, version: Version, name: string, params: unknown, method: string, id: JsonRpcId, res: Response): Promise<void> {
    let run;
    const justCreated = name === 'SendStreamingMessage';
    if (justCreated) {
      const p = parseParams(SendParams[version], params, method);
      ({ run } = await tasks.send(caller, readMessage(p.message), { ...(await sendOptions(version, p)), returnImmediately: true, streaming: true }));
    } else {
      const p = parseParams(z.strictObject({ id: z.string(), tenant, metadata: meta }), params, method);
      run = await tasks.find(caller, p.id);
      const task = await tasks.task(run);
      if (isFinal(task.status.state) && task.status.state !== 'input-required') {
        throw unsupported(`Task ${p.id} is ${task.status.state}: there is nothing to subscribe to`, { taskId: p.id, state: task.status.state });
      }
    }
    const abort = new AbortController();
    const sse = new SseWriter(res);
    sse.onClose(() => abort.abort());
    try {
      for await (const event of tasks.events(run, abort.signal, { justCreated })) {
        sse.send({ event: 'message', data: { jsonrpc: '2.0', id, result: eventWire(event, version) } });
      }
    } catch (error) {
      if (!abort.signal.aborted) sse.send({ event: 'message', data: errorAnswerFor(id, error, caller.req, ctx.log, method) });
    }
    sse.end();
  }

  api
    .route({
      method: 'post',
      path: '/a2a/{assistant_id}',
      access: ['custom_auth'],
      summary: 'A2A JSON-RPC 2.0 endpoint of an assistant (A2A 1.0 and 0.3 methods)',
      description:
        'One JSON-RPC 2.0 request. A2A 1.0 methods: `SendMessage`, `SendStreamingMessage` (SSE), `GetTask`, `CancelTask`, `ListTasks`, `SubscribeToTask` (SSE), ' +
        '`GetExtendedAgentCard`, `CreateTaskPushNotificationConfig`, `GetTaskPushNotificationConfig`, `ListTaskPushNotificationConfigs`, `DeleteTaskPushNotificationConfig`; ' +
        'their A2A 0.3 names (`message/send`, `message/stream`, `tasks/get`, `tasks/cancel`, `tasks/resubscribe`, `agent/getAuthenticatedExtendedCard`, `tasks/pushNotificationConfig/{set,get,list,delete}`) answer in 0.3 shapes. ' +
        '`contextId` is the thread (a UUID); each message is a task (a run).',
      tags,
      params: z.strictObject({ assistant_id: z.string() }),
      response: z.object({
        jsonrpc: z.literal('2.0'),
        id: z.union([z.string(), z.number(), z.null()]),
        result: z.unknown().optional(),
        error: z.unknown().optional(),
      }),
      errors: [400, 415],
      handler: async ({ params, req, res, auth }) => {
        const body: unknown = req.body;
        if (typeof body !== 'object' || body === null) {
          const typed = req.is('application/json') || req.is('application/*+json');
          res
            .status(typed ? 400 : 415)
            .json(
              errorAnswer(
                null,
                INVALID_REQUEST,
                typed ? 'Invalid Request: the body must be a JSON-RPC request object' : 'Unsupported Media Type: Content-Type must be application/json',
              ),
            );
          return;
        }
        if (Array.isArray(body)) return errorAnswer(null, INVALID_REQUEST, 'Invalid Request: A2A takes one request per call, not a batch');
        const request = body as Record<string, unknown>;
        const id = typeof request.id === 'string' || typeof request.id === 'number' ? request.id : null;
        if (request.jsonrpc !== '2.0' || typeof request.method !== 'string' || id === null) {
          return errorAnswer(id, INVALID_REQUEST, 'Invalid Request: a JSON-RPC 2.0 request with a string method and a string or number id');
        }
        if (request.params !== undefined && (typeof request.params !== 'object' || request.params === null || Array.isArray(request.params))) {
          return errorAnswer(id, INVALID_REQUEST, 'Invalid Request: params must be an object');
        }
        const method = request.method;
        try {
          const name = V10_NAMES.has(method) ? method : V03_NAMES[method];
          if (!name) throw new JsonRpcError(METHOD_NOT_FOUND, `Method not found: ${method}`, { method });
          const version: Version = V10_NAMES.has(method) ? '1.0' : '0.3';
          const asked = headerVersion(req);
          if (asked !== undefined && asked !== version) {
            throw new JsonRpcError(VERSION_NOT_SUPPORTED, `A2A-Version ${asked} does not match ${method}, a method of A2A ${version}`, {
              requested: asked,
              method,
              supportedVersions: ['1.0', '0.3'],
            });
          }
          const caller: Caller = { auth, req, assistant: await readable(auth, params.assistant_id) };
          if (STREAMING.has(name)) {
            await stream(caller, version, name, request.params ?? {}, method, id, res);
            return undefined;
          }
          return { jsonrpc: '2.0' as const, id, result: await answer(caller, version, name, request.params ?? {}, method) };
        } catch (error) {
          return errorAnswerFor(id, error, req, ctx.log, method);
        }
      },
    })
    .route({
      method: 'get',
      path: '/a2a/{assistant_id}/.well-known/agent-card.json',
      access: ['custom_auth'],
      summary: "An assistant's A2A agent card (A2A-Version: 0.3 for the 0.3 shape)",
      tags,
      params: z.strictObject({ assistant_id: z.string() }),
      response: AgentCardJson,
      otherStatuses: { 304: 'the card the client has (If-None-Match) is current' },
      errors: [404],
      handler: async ({ params, req, res, auth }) => {
        sendCard(req, res, cardOf(req, params.assistant_id, await readable(auth, params.assistant_id), cardVersion(req)));
      },
    })
    .route({
      method: 'get',
      path: '/.well-known/agent-card.json',
      access: ['custom_auth'],
      summary: "An assistant's A2A agent card, by `assistant_id` (an id or a graph name)",
      tags,
      query: z.strictObject({ assistant_id: z.string() }),
      response: AgentCardJson,
      otherStatuses: { 304: 'the card the client has (If-None-Match) is current' },
      errors: [404],
      handler: async ({ query, req, res, auth }) => {
        sendCard(req, res, cardOf(req, query.assistant_id, await readable(auth, query.assistant_id), cardVersion(req)));
      },
    });
}
