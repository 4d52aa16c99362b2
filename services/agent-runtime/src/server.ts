/**
 * The agent server of one project (one deployment revision): loads the project's graphs, keeps
 * assistants, threads, runs and checkpoints in its own Postgres schema, serves the LangGraph API
 * and runs the graphs in its worker role.
 */
import { createRequire } from 'node:module';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { createEventBroker } from '@berth/broker';
import type { Clock } from '@berth/clock';
import { assertIdentifier, createPool, migrate, withAdvisoryLock } from '@berth/db';
import { NotFoundError, RequestValidationError } from '@berth/errors';
import { startMetricsListener } from '@berth/metrics';
import { Api, cors, CorsPolicy, createApp, docsRouter, hasCredentialHeader, listen, openApiDocument, refuseUpgrade, type Access } from '@berth/http';
import type { Request as ExpressRequest, RequestHandler } from 'express';
import { leaseSettings, OwnerLiveness } from '@berth/lease';
import type { Logger } from '@berth/log';
import { selectQueueBackend } from '@berth/queue';
import { fileURLToPath } from 'node:url';
import { assistantRoutes, checkContext } from './api/assistants.js';
import { authErrorHandler, Authorizer, createAuthenticator, loadCustomAuth, type RequestAuth } from './auth/index.js';
import type { ServerContext } from './api/context.js';
import { deploymentCredentialCheck, requireDeploymentCredential } from './auth/deployment-credential.js';
import type { AgentApi, AgentCredential } from './api/access.js';
import { AuthHttpError } from './auth/errors.js';
import { threadStreamKey } from './protocol/events.js';
import { ProtocolTransport } from './protocol/routes.js';
import { cronRoutes } from './api/crons.js';
import { bindLoopbackClient, customRoutes, loadHttpApp } from './api/custom-routes.js';
import { mcpParseErrors, mcpRoutes } from './api/mcp.js';
import { A2aPush } from './a2a/push.js';
import { a2aParseErrors, a2aRoutes } from './a2a/routes.js';
import { A2aStore } from './a2a/store.js';
import { runRoutes } from './api/runs.js';
import { storeRoutes } from './api/store.js';
import { studioPages } from './api/studio.js';
import { systemRoutes } from './api/system.js';
import { threadRoutes } from './api/threads.js';
import { uiRoutes } from './api/ui.js';
import { webhookRoutes } from './api/webhooks.js';
import {
  contextValidator,
  graphSchemas,
  loadGraphs,
  prepareTypeSchemas,
  loadProjectConfig,
  loadProjectEnv,
  registerSdkLogger,
  servedFeatures,
  type LoadedGraph,
} from '@berth/langgraph-project';
import { graphDrawing, graphSubgraphs, systemAssistantDefaults, systemAssistantId, TypeSchemaReader } from './project/index.js';
import { loadStoreIndex } from './project/embeddings.js';
import { bundleProjectUi } from './project/ui-bundle.js';
import { CronScheduler } from './runs/cron-scheduler.js';
import { RunDispatcher } from './runs/dispatcher.js';
import { RunExecutor } from './runs/executor.js';
import { watchRuns } from './runs/metrics.js';
import { RunService } from './runs/run-service.js';
import { ThreadStateService } from './runs/thread-state.js';
import { newOwnerId, RunWorker } from './runs/worker.js';
import { WebhookDelivery, WebhookTargets, type WebhookConfig } from './runs/webhooks.js';
import { RunTracing, type TracingConfig } from './tracing/run-tracing.js';
import { AssistantStore } from './storage/assistants.js';
import { BerthPostgresSaver } from './storage/checkpointer.js';
import { useJsonbCodec } from './storage/json-codec.js';
import { CronStore } from './storage/crons.js';
import { copyCheckpoints, deleteCheckpoints, deleteCheckpointsAfter, latestCheckpoint } from './storage/checkpoints.js';
import { isUuid } from '@berth/ids';
import { redisKeyPrefix } from '@berth/agent-contract';
import { RunStore, type Run } from './storage/runs.js';
import type { MetadataFilter } from './storage/sql.js';
import { PostgresStore, StoreSweeper } from './storage/store.js';
import { ThreadStore } from './storage/threads.js';
import { ThreadSweeper } from './storage/thread-ttl.js';
import { WebhookStore } from './storage/webhooks.js';

export interface AgentServerConfig {
  /** Path of the project's `langgraph.json`. */
  configPath: string;
  databaseUrl: string;
  /**
   * Postgres schema of this deployment's data (assistants, threads, runs, checkpoints).
   * @default 'agent'
   */
  schema?: string;
  /** Queues and run events on Redis instead of Postgres. */
  redisUrl?: string;
  host: string;
  /** 0 picks a free port. */
  port: number;
  /**
   * Serve the listening socket on this inherited file descriptor (bound on `host:port` by the
   * deployer, outside this process's network namespace: a container's), and `host:port` inside,
   * where graph code's `new Client()` reaches this server. @default none: listen on `host:port`
   */
  listenFd?: number;
  /**
   * Runs executed at once by this process; 0 makes it an API-only process.
   * @default 10
   */
  workers?: number;
  /**
   * How long a claim holds a run without renewal: a dead worker's run moves to another worker
   * after it (see @berth/lease and docs/deployments.md, "Delivery of runs").
   * @default 5000
   */
  leaseMs?: number;
  /**
   * How long past its lease a run stays with a worker that is alive but renews nothing (cut off
   * from the database, or stalled): the longest database outage a worker rides through.
   * @default 60_000
   */
  leaseHoldMs?: number;
  /**
   * Longest a run may execute before it is stopped with status `timeout`.
   * @default 3_600_000 (1 hour)
   */
  runTimeoutMs?: number;
  /**
   * Let `x-auth-scheme: langsmith` requests (LangGraph Studio) skip the project's authenticate
   * handler. Only for servers whose callers something in front (the gateway) has authenticated.
   * @default false
   */
  trustStudioHeader?: boolean;
  /** Copy the project's env file into process.env for graph code (as `langgraph dev` does). @default true */
  applyProjectEnv?: boolean;
  /**
   * LANGGRAPH_CONFIG from the process environment (JSON: per graph id, the system assistant's config
   * and `context`). @default the project env's LANGGRAPH_CONFIG (when applyProjectEnv), else none
   */
  langgraphConfig?: string;
  /**
   * Answer only requests carrying this per-deployment credential (header
   * `x-berth-deployment-credential`, added by the gateway); everything but `GET /ok` is 401 without it.
   * @default none: every request is served (`berth dev`)
   */
  deploymentCredential?: string;
  /**
   * Serve the console's Studio at `/studio` from this folder (the built `@berth/console`): `berth dev`
   * sets it; deployed agent servers never do (the gateway's console has their Studio).
   * @default none: no Studio
   */
  studioDir?: string;
  /** Trace every run into this tracing project. @default none: runs are not traced */
  tracing?: TracingConfig;
  /**
   * How often the worker role deletes expired store items.
   * @default langgraph.json store.ttl.sweep_interval_minutes, else 1 minute
   */
  storeSweepIntervalMs?: number;
  /** Sign and send run webhooks. @default none: a run naming a `webhook` is refused (422) */
  webhooks?: WebhookConfig;
  /**
   * Serve this process's metrics (`GET /metrics`, the runs' among them) on a listener of its own at
   * this address: never on the server's port, which the gateway's `/d/{deployment_id}/` reaches.
   * @default none: no metrics listener
   */
  metrics?: { host: string; port: number };
  /**
   * The time crons fall due by, the store's and threads' TTLs run on, runs' leases are taken,
   * renewed and expire by (with the worker's sweeps for runs to take over), and runs' time limits
   * (runTimeoutMs) run on; tests move it by hand.
   * @default systemClock
   */
  clock?: Clock;
}

export interface RunningAgentServer {
  url: string;
  port: number;
  /** The built-in routes it serves and who may call each (api/access.ts). */
  routes: readonly { method: string; path: string; access: Access<AgentCredential> }[];
  /** The metrics listener's `http://host:port` (AgentServerConfig.metrics), when there is one. */
  metricsUrl?: string;
  /**
   * Stops the server. With `drainMs` (a newer server of the project already serves, as after
   * `berth dev` reloads): it takes no new connections or runs first and lets the runs executing
   * here finish, for at most that long.
   */
  close(options?: { drainMs?: number }): Promise<void>;
}

/** One authentication per request: custom routes authenticate before the built-in route they may pass to. */
/** `checkWebhook` of a project whose langgraph.json turns run webhooks off. */
async function refuseWebhooks(): Promise<never> {
  throw new RequestValidationError([
    { loc: ['body', 'webhook'], msg: 'this project sends no webhooks: its langgraph.json sets http.disable_webhooks', type: 'value_error' },
  ]);
}

/** What the authenticator reads of an express request, for a WebSocket upgrade request (which express never sees). */
function asExpressRequest(req: IncomingMessage): ExpressRequest {
  return Object.assign(Object.create(req) as ExpressRequest, {
    protocol: 'http',
    originalUrl: req.url,
    get: (name: string) => req.headers[name.toLowerCase()],
  });
}

function oncePerRequest<T>(authenticate: (req: ExpressRequest) => Promise<T>): (req: ExpressRequest) => Promise<T> {
  const done = new WeakMap<ExpressRequest, Promise<T>>();
  return (req) => {
    let result = done.get(req);
    if (!result) {
      result = authenticate(req);
      done.set(req, result);
    }
    return result;
  };
}

export const AGENT_SERVER_VERSION: string = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

const migrationsDir = fileURLToPath(new URL('../migrations', import.meta.url));

export async function startAgentServer(config: AgentServerConfig, log: Logger): Promise<RunningAgentServer> {
  const schema = assertIdentifier(config.schema ?? 'agent');
  const project = loadProjectConfig(config.configPath);
  const projectEnv = config.applyProjectEnv !== false ? loadProjectEnv(project) : {};
  // Graph code reads its settings (API keys of model providers…) from process.env, as under `langgraph dev`.
  // eslint-disable-next-line berth/no-process-env -- handing the project's env to graph code, not reading a setting
  for (const [key, value] of Object.entries(projectEnv)) process.env[key] ??= value;
  const systemDefaults =
    config.langgraphConfig !== undefined
      ? systemAssistantDefaults(config.langgraphConfig, 'environment')
      : systemAssistantDefaults(projectEnv.LANGGRAPH_CONFIG, project.envFile ?? project.configPath);
  registerSdkLogger(log);
  const graphs = await loadGraphs(project);
  // Type-checking a graph module takes seconds: begun now in a worker, usually done before asked for.
  const typeSchemas = new TypeSchemaReader({ log });
  for (const loaded of graphs.values()) prepareTypeSchemas(loaded, typeSchemas);
  const { storeIndex, customAuth, httpApp, uiBundles } = await (async () => ({
    // After the graphs: an embed module is imported with the loader (and tsconfig) they set up.
    storeIndex: await loadStoreIndex(project),
    // A broken auth module stops the server here, before it serves anything unprotected.
    customAuth: await loadCustomAuth(project),
    httpApp: await loadHttpApp(project),
    uiBundles: await bundleProjectUi(project),
  }))().catch(async (error: unknown) => {
    // A server that does not start leaves no type-checking worker behind.
    await typeSchemas.close();
    throw error;
  });
  const authz = new Authorizer(customAuth);
  const graph = (graphId: string): LoadedGraph => {
    const found = graphs.get(graphId);
    if (!found) throw new NotFoundError(`Graph ${graphId} not found in this project (have: ${[...graphs.keys()].join(', ')})`);
    return found;
  };

  await migrate({ connectionString: config.databaseUrl, schema, directory: migrationsDir, log });
  // jsonb comes back through the codec that escaped it (strings with U+0000 or lone surrogates).
  const pool = useJsonbCodec(
    createPool({ connectionString: config.databaseUrl, schema, max: 20, applicationName: `berth-agent-${schema}`, prepareStatements: true, log }),
  );
  // Checkpoint writes of async-durability runs go through this one (no wait for the WAL flush).
  const lazyPool = useJsonbCodec(
    createPool({
      connectionString: config.databaseUrl,
      schema,
      max: 10,
      applicationName: `berth-agent-${schema}-lazy`,
      prepareStatements: true,
      synchronousCommit: false,
      log,
    }),
  );
  const lease = leaseSettings({
    ...(config.leaseMs ? { leaseMs: config.leaseMs } : {}),
    ...(config.leaseHoldMs !== undefined ? { holdMs: config.leaseHoldMs } : {}),
  });
  // A run's writes are retried for as long as its worker may hold it without renewing.
  const retryWritesMs = lease.leaseMs + lease.holdMs;
  const checkpointer = new BerthPostgresSaver(pool, schema, lazyPool, { log, retryWritesMs });
  const broker = createEventBroker(
    config.redisUrl
      ? { kind: 'redis', url: config.redisUrl, prefix: redisKeyPrefix(schema) }
      : { kind: 'postgres', connectionString: config.databaseUrl, schema: `${schema}_events` },
    { log },
  );
  const queue = selectQueueBackend({ databaseUrl: config.databaseUrl, ...(config.redisUrl ? { redisUrl: config.redisUrl } : {}) });
  const queueBackend = queue.kind === 'postgres' ? { ...queue, schema: `${schema}_queue` } : { ...queue, prefix: redisKeyPrefix(schema) };
  const dispatcher = new RunDispatcher(queueBackend, log);
  const crons = new CronStore(pool);
  /** The clock option of everything that waits or reads the time, when the config names one. */
  const clocked = config.clock ? { clock: config.clock } : {};
  const cronScheduler = new CronScheduler({ crons, queue: queueBackend, log }, clocked);
  // The checkpointer's tables and BullMQ's schema are created without a lock of their own, which
  // fails when two processes start on a fresh database at once: they take turns here.
  await withAdvisoryLock(
    config.databaseUrl,
    `berth.agent-setup.${schema}`,
    async () => {
      await checkpointer.setup();
      await broker.ready?.();
      await dispatcher.ready();
      await cronScheduler.ready();
    },
    log,
  );

  // Whole-thread checkpoint operations, after the writes a run may still have queued behind. A
  // failed write was logged by the checkpointer and failed its run; the operation goes on.
  const settled = (threadId: string) => checkpointer.settled(threadId);
  const checkpointRows = {
    async delete(threadId: string) {
      await settled(threadId);
      await deleteCheckpoints(pool, threadId);
      // With its protocol v2 events: a thread created again under the id must not replay them.
      await broker.delete(threadStreamKey(threadId));
    },
    async deleteAfter(threadId: string, id: string | null) {
      await settled(threadId);
      await deleteCheckpointsAfter(pool, threadId, id);
    },
    async copy(from: string, to: string) {
      await settled(from);
      await copyCheckpoints(pool, from, to);
    },
  };

  const assistants = new AssistantStore(pool);
  // langgraph.json checkpointer.ttl: the TTL of threads created without one, and how they are swept.
  const threadTtl = project.json.checkpointer?.ttl;
  const threads = new ThreadStore(
    pool,
    threadTtl?.default_ttl ? { defaultTtl: { strategy: threadTtl.strategy ?? 'delete', minutes: threadTtl.default_ttl } } : {},
  );
  const runs = new RunStore(pool, clocked);
  const storeTtl = project.json.store?.ttl;
  const store = new PostgresStore(pool, {
    ...(storeIndex ? { index: storeIndex } : {}),
    ...(storeTtl?.default_ttl ? { defaultTtlMinutes: storeTtl.default_ttl } : {}),
    ...(storeTtl?.refresh_on_read !== undefined ? { refreshOnRead: storeTtl.refresh_on_read } : {}),
    ...clocked,
  });
  const webhookStore = new WebhookStore(pool);
  // `http.disable_*` in langgraph.json: route groups (and run webhooks) this project turns off.
  const served = servedFeatures(project.http);
  for (const warning of project.warnings) log.warn({ config: project.configPath }, warning);
  const webhookConfig = served.webhooks ? config.webhooks : undefined;
  const webhookTargets = webhookConfig ? new WebhookTargets(webhookConfig.privateEgress, httpApp !== undefined, webhookConfig.proxied) : undefined;
  // A2A push notifications go out as run webhooks do: only where those may be sent.
  const a2aPush = served.a2a && webhookTargets ? new A2aPush({ pool, targets: webhookTargets, runs, threads, log }) : undefined;
  for (const graphId of graphs.keys()) await assistants.ensureSystem(systemAssistantId(graphId), graphId, systemDefaults.get(graphId));

  const validators = new Map([...graphs].map(([id, g]) => [id, contextValidator(g)]));
  const resolveAssistant = async (ref: string, filter?: MetadataFilter) => {
    if (graphs.has(ref)) return assistants.get(systemAssistantId(ref), filter);
    if (!isUuid(ref)) throw new NotFoundError('Assistant not found');
    return assistants.get(ref, filter);
  };
  const ctx: ServerContext = {
    assistants,
    threads,
    runs,
    store,
    crons,
    cronScheduler,
    graph,
    resolveAssistant,
    contextProblems: (graphId, context) => validators.get(graphId)?.(context) ?? [],
    schemas: async (graphId) => graphSchemas(graph(graphId), { types: typeSchemas }),
    drawing: async (assistant, xray) => graphDrawing(graph(assistant.graph_id), { xray }),
    subgraphs: async (assistant, namespace, recurse) =>
      graphSubgraphs(graph(assistant.graph_id), { ...(namespace ? { namespace } : {}), recurse, config: assistant.config, types: typeSchemas, log }),
    deleteCheckpoints: checkpointRows.delete,
    copyCheckpoints: checkpointRows.copy,
    state: new ThreadStateService(threads, graph, checkpointer, runs, assistants),
    authz,
    log,
    runService: undefined as unknown as RunService,
  };
  ctx.runService = new RunService({
    threads,
    runs,
    broker,
    dispatcher,
    // A graph's system assistant is named without reading it (create_run checks it still exists).
    resolveAssistant: async (ref) => (graphs.has(ref) ? { assistant_id: systemAssistantId(ref), graph_id: ref } : resolveAssistant(ref)),
    checkContext: (graphId, context) => checkContext(ctx, graphId, context, ['body', 'context']),
    authz,
    log,
    runLocally: (runId) => worker?.tryLocal(runId) ?? false,
    reserveLocal: () => worker?.reserve(),
    localResult: (runId) => worker?.localResult(runId),
    ...(webhookTargets ? { checkWebhook: (url: string) => webhookTargets.check(url) } : served.webhooks ? {} : { checkWebhook: refuseWebhooks }),
  });

  const workers = config.workers ?? 10;
  const tracing = config.tracing && workers > 0 ? new RunTracing(config.tracing, log) : undefined;
  // Deliveries have their own queue and workers: they never take a run's slot.
  const webhooks =
    webhookConfig && workers > 0
      ? new WebhookDelivery(
          { store: webhookStore, queue: queueBackend, log, ...(httpApp ? { ownRoutes: async (request: Request) => httpApp.fetch(request) } : {}) },
          webhookConfig,
        )
      : undefined;
  await webhooks?.start();
  // Declared with let: the run service above refers to it before it exists.
  let worker: RunWorker | undefined;
  const owner = newOwnerId();
  worker =
    workers > 0
      ? new RunWorker(
          {
            threads,
            runs,
            broker,
            dispatcher,
            queue: queueBackend,
            executor: new RunExecutor({
              graph,
              checkpointer,
              store,
              broker,
              log,
              latestCheckpoint: (threadId) => latestCheckpoint(pool, threadId),
              eventSeq: (threadId) => threads.eventSeq(threadId),
              retryWritesMs,
              ...(tracing ? { tracing } : {}),
            }),
            deleteCheckpoints: checkpointRows.delete,
            deleteCheckpointsAfter: checkpointRows.deleteAfter,
            ...(webhooks ? { webhooks } : {}),
            ...(webhooks && a2aPush ? { runEnded: (run: Run) => a2aPush.runEnded(run, webhooks) } : {}),
            owner,
            liveness: new OwnerLiveness({
              connectionString: config.databaseUrl,
              owner,
              applicationName: `berth-agent-${schema}-liveness`,
              log,
              ...clocked,
            }),
            ...clocked,
            log,
          },
          {
            concurrency: workers,
            ...lease,
            ...(config.runTimeoutMs ? { timeoutMs: config.runTimeoutMs } : {}),
          },
        )
      : undefined;
  await worker?.start();
  const sweeper =
    workers > 0 ? new StoreSweeper(store, config.storeSweepIntervalMs ?? (storeTtl?.sweep_interval_minutes ?? 1) * 60_000, log, config.clock) : undefined;
  sweeper?.start();
  const threadSweeper =
    workers > 0
      ? new ThreadSweeper(threads, log, {
          ...(threadTtl?.sweep_interval_minutes ? { intervalMs: threadTtl.sweep_interval_minutes * 60_000 } : {}),
          ...(threadTtl?.sweep_limit ? { limit: threadTtl.sweep_limit } : {}),
          ...clocked,
        })
      : undefined;
  threadSweeper?.start();
  // Ticks are fired by the worker role only; an API-only process just queues them.
  if (workers > 0) await cronScheduler.start(ctx.runService, workers);

  // The project's auth handler, asked first on the routes that take custom_auth (api/access.ts).
  const authenticate = customAuth ? oncePerRequest(createAuthenticator(customAuth, { trustStudioHeader: config.trustStudioHeader ?? false })) : undefined;
  // Behind the gateway without custom auth, every request that has the deployment credential was
  // authenticated by the gateway with a credential header (which it does not pass on).
  const credentialed = config.deploymentCredential && !customAuth ? () => true : hasCredentialHeader;
  // Routes say what they take (api/access.ts): the deployment credential is checked in front of
  // them all (requireDeploymentCredential), custom auth here for the routes that take it.
  const api: AgentApi = new Api({
    authenticate: async (req, accepts) => (authenticate && accepts.includes('custom_auth') ? authenticate(req) : (undefined as unknown as RequestAuth)),
    documentedAuth: (accepts) => authenticate !== undefined && accepts.includes('custom_auth'),
    credentialed,
  });
  systemRoutes(api, {
    info: served.meta,
    version: AGENT_SERVER_VERSION,
    features: { assistants: served.assistants, crons: served.runs, store: served.store, webhooks: webhookConfig !== undefined, mcp: served.mcp },
    langgraphVersion: (createRequire(import.meta.url)('@langchain/langgraph/package.json') as { version: string }).version,
    checkDb: async () => {
      await pool.query('SELECT 1');
    },
  });
  if (served.assistants) assistantRoutes(api, ctx);
  if (served.threads) threadRoutes(api, ctx);
  if (served.runs) {
    runRoutes(api, ctx);
    cronRoutes(api, ctx);
    webhookRoutes(api, ctx, webhookStore);
  }
  // Protocol v2 (threads, runs and their events in one): where both threads and runs are served.
  const protocol = served.threads && served.runs ? new ProtocolTransport(ctx, broker) : undefined;
  protocol?.routes(api);
  if (served.store) storeRoutes(api, ctx);
  if (served.mcp) mcpRoutes(api, ctx, { graphs: [...graphs.values()], serverInfo: { name: 'berth-agent-server', version: AGENT_SERVER_VERSION } });
  if (served.a2a) {
    const graphDescriptions = new Map([...graphs.values()].map((g) => [g.graphId, g.description]));
    a2aRoutes(api, ctx, { graphDescriptions, store: new A2aStore(pool), ...(a2aPush ? { push: a2aPush } : {}) });
  }
  if (served.ui) uiRoutes(api, ctx, uiBundles);
  const document = () => openApiDocument([api], { title: 'Berth agent server', version: AGENT_SERVER_VERSION });
  // An error middleware (arity 4): express calls it for errors only, before the shared handler.
  const authErrors = authErrorHandler() as unknown as RequestHandler;
  const accessOf = (method: string, path: string) => api.match(method, path)?.access;
  const isPublic = (method: string, path: string) => accessOf(method, path) === 'public';
  const skipsAuth = (method: string, path: string) => {
    const access = accessOf(method, path);
    return access !== undefined && (access === 'public' || !access.includes('custom_auth'));
  };
  const credentialCheck = config.deploymentCredential ? [requireDeploymentCredential(config.deploymentCredential, isPublic)] : [];
  const userRoutes = httpApp ? [customRoutes(httpApp, { ...(authenticate ? { authenticate } : {}), skipsAuth, log })] : [];
  // Error middleware: JSON-RPC paths answer unreadable bodies (from the app's parser or a route) in JSON-RPC's terms.
  const jsonRpcErrors = [...(served.mcp ? [mcpParseErrors()] : []), ...(served.a2a ? [a2aParseErrors()] : [])] as unknown as RequestHandler[];
  const app = createApp({
    logger: log,
    routes: [
      ...credentialCheck,
      cors(project.http?.cors),
      docsRouter(document, 'Berth agent server'),
      ...(config.studioDir ? [studioPages(config.studioDir)] : []),
      ...userRoutes,
      api.router(),
      ...jsonRpcErrors,
      authErrors,
    ],
  });
  const metrics = config.metrics ? await startMetricsListener({ ...config.metrics, logger: log }) : undefined;
  const server = await listen(app, config.host, config.port, config.listenFd);
  const unwatchRuns = watchRuns(runs, broker, log);
  // In a container the inherited socket is not in its network namespace: graph code reaches this
  // server on the same address inside.
  const inside = config.listenFd === undefined ? undefined : await listen(app, config.host, server.port);
  // WebSocket upgrades (protocol v2) pass the same checks as requests: the deployment credential, then custom auth.
  const hasCredential = config.deploymentCredential ? deploymentCredentialCheck(config.deploymentCredential) : undefined;
  const corsPolicy = new CorsPolicy(project.http?.cors);
  const upgrade = protocol?.upgradeHandler(async (req) => {
    if (hasCredential && !hasCredential(req)) throw new AuthHttpError(401, 'This agent server answers only requests forwarded by the Berth gateway', {});
    return authenticate ? authenticate(asExpressRequest(req)) : undefined;
  });
  for (const running of [server, inside]) {
    running?.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      // Browsers apply no CORS to WebSockets: a page's Origin is checked here, as http.cors would.
      const origin = req.headers.origin;
      if (origin !== undefined && !corsPolicy.allows(origin)) return refuseUpgrade(socket, 403, `Origin ${origin} is not allowed by the project's http.cors`);
      if (!upgrade?.(req, socket, head)) refuseUpgrade(socket, 404, 'Not Found');
    });
  }
  // `new Client()` without an apiUrl, in graph code or the http.app, talks to this server.
  bindLoopbackClient(server.url, config.deploymentCredential);
  log.info(
    {
      url: server.url,
      graphs: [...graphs.keys()],
      workers,
      customAuth: customAuth?.spec ?? null,
      storeIndex: storeIndex?.spec ?? null,
      tracing: tracing?.describe ?? null,
    },
    'agent server listening',
  );
  return {
    url: server.url,
    port: server.port,
    ...(metrics ? { metricsUrl: metrics.url } : {}),
    routes: api.routes.map(({ method, path, access }) => ({ method, path, access })),
    close: async (options = {}) => {
      if (options.drainMs !== undefined) {
        // Requests in flight (a run's stream, a /wait) get their answers while their runs finish;
        // clients keeping their connections are told to close them, not cut off.
        server.drain();
        inside?.drain();
        await worker?.close({ drainMs: options.drainMs });
      }
      protocol?.close();
      unwatchRuns();
      await Promise.all([server.close(), inside?.close(), metrics?.close()]);
      await typeSchemas.close();
      await cronScheduler.close();
      await worker?.close();
      await sweeper?.close();
      await threadSweeper?.close();
      // Deliveries under way finish (each within its timeout); queued ones wait for the next start.
      await webhooks?.close();
      // The traces of the runs that ended here, sent (or counted as dropped) within a few seconds.
      await tracing?.close();
      // Runs still executing here are taken over elsewhere: save what they queued first.
      await checkpointer.flushAll();
      await dispatcher.close();
      await broker.close();
      await pool.end();
      await lazyPool.end();
    },
  };
}
