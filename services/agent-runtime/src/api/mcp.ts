/**
 * `POST /mcp`: the Model Context Protocol over its Streamable HTTP transport, stateless (no
 * session, no server-initiated stream: GET is 405, DELETE does nothing), every answer
 * `application/json`. The project's graphs are its tools: one per graph, named by the graph id and
 * described by `graphs.<id>.description`, plus each user-created assistant whose name is a valid
 * tool name no other tool has. `tools/call` runs the tool as a threadless run and waits for it.
 *
 * Authentication is the Api's (custom auth included); listing assistants as tools goes through
 * `assistants:search` (a user it refuses sees only the graph tools), running a tool through
 * `threads:create_run`, like any run.
 */
import type { ErrorRequestHandler, Request, Response } from 'express';
import { z } from 'zod';
import { isBerthError } from '@berth/errors';
import type { Api } from '@berth/http';
import type { RequestAuth } from '../auth/index.js';
import { GraphLoadError, type JsonSchema, type LoadedGraph } from '@berth/langgraph-project';
import { systemAssistantId } from '../project/index.js';
import type { ServerContext } from './context.js';
import {
  errorAnswer,
  errorAnswerFor,
  INTERNAL_ERROR,
  INVALID_PARAMS,
  INVALID_REQUEST,
  JsonRpcError,
  jsonRpcParseErrors,
  METHOD_NOT_FOUND,
  SERVER_ERROR,
  type JsonRpcId,
} from './json-rpc.js';
import { cancelLeftRun, passHeaders, runOutcome } from './runs.js';
import type { AgentApi } from './access.js';

/** Newest first: `initialize` answers with the client's version when it is here, else the newest. */
const PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'] as const;
/** What a request without an `MCP-Protocol-Version` header speaks (the transport's rule). */
const DEFAULT_VERSION = '2025-03-26';
/** JSON-RPC batches exist in this version and those before it; 2025-06-18 removed them. */
const LAST_BATCH_VERSION = '2025-03-26';
/** The spec's advice for tool names: 1–128 of these characters. */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
/** User-created assistants looked at for tools (the list is not paginated). */
const MAX_ASSISTANT_TOOLS = 1000;

type Id = JsonRpcId;
type Message =
  { kind: 'request'; id: Id; method: string; params: Record<string, unknown> } | { kind: 'notification' } | { kind: 'invalid'; id: Id | null; why: string };

interface Tool {
  name: string;
  description?: string;
  inputSchema: JsonSchema;
  /** What a run of the tool names: the graph id (its system assistant) or an assistant id. */
  assistantRef: string;
  /** The graph's input is not an object: the tool takes it as its `input` argument. */
  wrapped: boolean;
}

export interface McpOptions {
  graphs: LoadedGraph[];
  serverInfo: { name: string; version: string };
}

/** What POST /mcp answers with (for the OpenAPI document; the handler writes it). */
const JsonRpcResponse = z.object({
  jsonrpc: z.literal('2.0'),
  id: z.union([z.string(), z.number(), z.null()]),
  result: z.record(z.string(), z.unknown()).optional(),
  error: z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }).optional(),
});

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A tool's input schema must be an object schema: any other graph input becomes its `input` property. */
export function toolInput(schema: JsonSchema | null): { inputSchema: JsonSchema; wrapped: boolean } {
  if (!schema) return { inputSchema: { type: 'object' }, wrapped: false };
  if (schema.type === 'object') return { inputSchema: schema, wrapped: false };
  const { $schema, ...inner } = schema;
  return { inputSchema: { ...($schema ? { $schema } : {}), type: 'object', properties: { input: inner }, required: ['input'] }, wrapped: true };
}

function classify(message: unknown): Message {
  if (!isObject(message) || message.jsonrpc !== '2.0') return { kind: 'invalid', id: null, why: 'not a JSON-RPC 2.0 message' };
  const id = typeof message.id === 'string' || typeof message.id === 'number' ? message.id : null;
  if (!('method' in message)) {
    // A client's response to a request of ours: this server sends none, so there is nothing to do.
    if (id !== null && ('result' in message || 'error' in message)) return { kind: 'notification' };
    return { kind: 'invalid', id, why: 'a message needs a method (or a result or error with an id)' };
  }
  if (typeof message.method !== 'string') return { kind: 'invalid', id, why: 'method must be a string' };
  if (message.params !== undefined && !isObject(message.params)) return { kind: 'invalid', id, why: 'params must be an object' };
  if (!('id' in message)) return { kind: 'notification' };
  if (id === null) return { kind: 'invalid', id: null, why: 'id must be a string or a number' };
  return { kind: 'request', id, method: message.method, params: (message.params as Record<string, unknown> | undefined) ?? {} };
}

/** Both media types the transport requires the client to accept, named explicitly. */
function acceptsBoth(accept: string | undefined): boolean {
  const types = new Set((accept ?? '').split(',').map((part) => part.split(';')[0]!.trim().toLowerCase()));
  return types.has('application/json') && types.has('text/event-stream');
}

/** Answers a body that is not JSON with a JSON-RPC parse error instead of the usual 422. */
export const mcpParseErrors = (): ErrorRequestHandler => jsonRpcParseErrors(/^\/mcp\/?$/i);

export function mcpRoutes(api: AgentApi, ctx: ServerContext, options: McpOptions): void {
  const graphs = new Map(options.graphs.map((g) => [g.graphId, g]));

  /** The tools this user sees, in a stable order: graphs first, then assistants by creation. */
  async function tools(auth: RequestAuth): Promise<Tool[]> {
    const forGraph = async (graphId: string) => {
      try {
        return toolInput((await ctx.schemas(graphId)).input_schema);
      } catch (error) {
        // A factory that fails when called for its schema still runs (its runs report why): the tool takes any object.
        if (!(error instanceof GraphLoadError)) throw error;
        ctx.log.warn({ err: error, graphId }, 'no input schema for the MCP tool of this graph');
        return toolInput(null);
      }
    };
    const list: Tool[] = [];
    for (const graph of graphs.values()) {
      const input = await forGraph(graph.graphId);
      list.push({ name: graph.graphId, ...(graph.description ? { description: graph.description } : {}), ...input, assistantRef: graph.graphId });
    }
    let filter;
    try {
      ({ filter } = await ctx.authz.authorize(auth, 'assistants:search', { limit: MAX_ASSISTANT_TOOLS, offset: 0 }));
    } catch (error) {
      if (isBerthError(error) && error.code === 'permission_denied') return list;
      throw error;
    }
    const found = await ctx.assistants.search({ limit: MAX_ASSISTANT_TOOLS, offset: 0, ...(filter ? { filter } : {}) });
    const named = found.filter((a) => a.assistant_id !== systemAssistantId(a.graph_id) && graphs.has(a.graph_id) && TOOL_NAME.test(a.name));
    const uses = new Map<string, number>();
    for (const a of named) uses.set(a.name, (uses.get(a.name) ?? 0) + 1);
    for (const a of named) {
      // A name two assistants share, or a graph's, would make calls ambiguous: such assistants are left out.
      if (uses.get(a.name)! > 1 || graphs.has(a.name)) continue;
      const description = a.description ?? graphs.get(a.graph_id)!.description;
      list.push({ name: a.name, ...(description ? { description } : {}), ...(await forGraph(a.graph_id)), assistantRef: a.assistant_id });
    }
    return list;
  }

  async function callTool(params: Record<string, unknown>, auth: RequestAuth, req: Request, res: Response) {
    if (typeof params.name !== 'string') throw new JsonRpcError(INVALID_PARAMS, 'tools/call needs the tool name in params.name');
    if (params.arguments !== undefined && !isObject(params.arguments)) throw new JsonRpcError(INVALID_PARAMS, 'params.arguments must be an object');
    const tool = (await tools(auth)).find((t) => t.name === params.name);
    if (!tool) throw new JsonRpcError(INVALID_PARAMS, `Unknown tool: ${params.name}`);
    const args = (params.arguments as Record<string, unknown> | undefined) ?? {};
    const run = await ctx.runService.create(undefined, { assistant_id: tool.assistantRef, input: tool.wrapped ? args.input : args }, passHeaders(req), auth);
    const abort = new AbortController();
    // Nobody is left to read the result: the run is stopped rather than left to finish unseen.
    const onClose = () => {
      abort.abort();
      if (!res.writableFinished) void cancelLeftRun(ctx, run.run_id);
    };
    res.on('close', onClose);
    try {
      const outcome = await runOutcome(ctx, run, abort.signal).catch((error: unknown) => {
        // Not a failure of the server: nobody will read this answer.
        if (abort.signal.aborted) throw new JsonRpcError(INTERNAL_ERROR, 'The client went away before the run ended', undefined, { cause: error });
        throw error;
      });
      if ('error' in outcome) return { content: [{ type: 'text', text: outcome.error.message }], isError: true };
      if (outcome.status && outcome.status !== 'success')
        return { content: [{ type: 'text', text: `The run ended with status ${outcome.status}` }], isError: true };
      const output = outcome.output;
      return { content: [{ type: 'text', text: JSON.stringify(output) }], ...(isObject(output) ? { structuredContent: output } : {}) };
    } finally {
      res.off('close', onClose);
    }
  }

  async function answer(request: Extract<Message, { kind: 'request' }>, auth: RequestAuth, req: Request, res: Response): Promise<unknown> {
    switch (request.method) {
      case 'initialize': {
        const asked = request.params.protocolVersion;
        if (typeof asked !== 'string') throw new JsonRpcError(INVALID_PARAMS, 'initialize needs params.protocolVersion');
        return {
          protocolVersion: (PROTOCOL_VERSIONS as readonly string[]).includes(asked) ? asked : PROTOCOL_VERSIONS[0],
          capabilities: { tools: { listChanged: false } },
          serverInfo: options.serverInfo,
        };
      }
      case 'ping':
        return {};
      case 'tools/list':
        return { tools: (await tools(auth)).map(({ name, description, inputSchema }) => ({ name, ...(description ? { description } : {}), inputSchema })) };
      case 'tools/call':
        return callTool(request.params, auth, req, res);
      default:
        throw new JsonRpcError(METHOD_NOT_FOUND, `Method not found: ${request.method}`);
    }
  }

  /** The response to one request: its result, or the error it ended with (never a thrown error). */
  async function respond(request: Extract<Message, { kind: 'request' }>, auth: RequestAuth, req: Request, res: Response) {
    try {
      return { jsonrpc: '2.0', id: request.id, result: await answer(request, auth, req, res) };
    } catch (error) {
      return errorAnswerFor(request.id, error, req, ctx.log, request.method);
    }
  }

  api
    .route({
      method: 'post',
      path: '/mcp',
      access: ['custom_auth'],
      summary: 'Model Context Protocol (Streamable HTTP, stateless): the graphs as tools',
      description:
        'One JSON-RPC 2.0 message (or, up to protocol version 2025-03-26, a batch). Methods: `initialize`, `ping`, `tools/list`, `tools/call`. ' +
        'The request must send `Content-Type: application/json` and accept both `application/json` and `text/event-stream`; answers are `application/json`.',
      tags: ['mcp'],
      response: z.union([JsonRpcResponse, z.array(JsonRpcResponse)]),
      otherStatuses: { 202: 'the body held only notifications (or responses)' },
      errors: [400, 406, 415],
      handler: async ({ req, res, auth }) => {
        if (!acceptsBoth(req.headers.accept)) {
          res.status(406).json(errorAnswer(null, SERVER_ERROR, 'Not Acceptable: the client must accept both application/json and text/event-stream'));
          return;
        }
        if (!req.is('application/json')) {
          res.status(415).json(errorAnswer(null, SERVER_ERROR, 'Unsupported Media Type: Content-Type must be application/json'));
          return;
        }
        const header = req.headers['mcp-protocol-version'];
        const version = typeof header === 'string' ? header : DEFAULT_VERSION;
        if (!(PROTOCOL_VERSIONS as readonly string[]).includes(version)) {
          res
            .status(400)
            .json(errorAnswer(null, SERVER_ERROR, `Bad Request: unsupported MCP-Protocol-Version ${version} (supported: ${PROTOCOL_VERSIONS.join(', ')})`));
          return;
        }
        const body: unknown = req.body;
        const batch = Array.isArray(body);
        if (batch && (body.length === 0 || version > LAST_BATCH_VERSION)) {
          const why = body.length === 0 ? 'an empty batch' : `batches are not part of protocol version ${version}`;
          res.status(400).json(errorAnswer(null, INVALID_REQUEST, `Invalid Request: ${why}`));
          return;
        }
        const messages = (batch ? body : [body]).map(classify);
        if (!batch && messages[0]!.kind === 'invalid') {
          const invalid = messages[0] as Extract<Message, { kind: 'invalid' }>;
          res.status(400).json(errorAnswer(invalid.id, INVALID_REQUEST, `Invalid Request: ${invalid.why}`));
          return;
        }
        const answers = await Promise.all(
          messages.map(async (m) => {
            if (m.kind === 'invalid') return errorAnswer(m.id, INVALID_REQUEST, `Invalid Request: ${m.why}`);
            if (m.kind === 'notification') return undefined;
            if (batch && m.method === 'initialize') return errorAnswer(m.id, INVALID_REQUEST, 'Invalid Request: initialize must not be part of a batch');
            return respond(m, auth, req, res);
          }),
        );
        const responses = answers.filter((a) => a !== undefined);
        if (responses.length === 0) res.status(202).end();
        else res.status(200).json(batch ? responses : responses[0]);
      },
    })
    .route({
      method: 'delete',
      path: '/mcp',
      access: ['custom_auth'],
      summary: 'End an MCP session: the server keeps none, so there is nothing to end',
      tags: ['mcp'],
      handler: () => undefined,
    });
}
