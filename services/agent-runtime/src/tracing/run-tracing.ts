/**
 * Traces of an agent server's runs, recorded the way LangChain records them: a `LangChainTracer`
 * callback per run (root run, a child per node, llm runs with their token usage, errors) and a
 * `langsmith` Client pointed at the platform's trace API, with the deployment's own credential.
 *
 * Tracing never slows or fails a run: LangChain calls the tracer in the background (its callback
 * queue), the Client batches runs and hands each batch to TraceDelivery, which accepts it at once
 * and sends it later — or drops it, counted, when the trace store cannot take it.
 */
import { awaitAllCallbacks } from '@langchain/core/callbacks/promises';
import type { BaseCallbackHandler } from '@langchain/core/callbacks/base';
import { LangChainTracer } from '@langchain/core/tracers/tracer_langchain';
import { Client } from 'langsmith';
import type { Logger } from '@berth/log';
import { nestedDeeperThan } from '../storage/json-codec.js';
import { TraceDelivery, type TraceDeliveryOptions } from './trace-delivery.js';

/** Deepest nesting of a traced value the trace store keeps (its run documents nest at most 128 levels). */
const MAX_TRACED_DEPTH = 120;

/**
 * A run's traced inputs, outputs or metadata as the trace store can keep them: it refuses a run
 * nested deeper than 128 levels, so such a value is replaced by a note (the store cleans strings
 * with U+0000 or lone surrogates itself). Anything else is returned as it is. (The run itself
 * stores the values exactly; only their trace is shortened.)
 */
export function traceable(value: KVMap): KVMap {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    return value; // a BigInt, a cycle: the Client's serializer has its own answer for those
  }
  if (text === undefined || !nestedDeeperThan(text, MAX_TRACED_DEPTH)) return value;
  return { note: `not traced: nested deeper than ${MAX_TRACED_DEPTH} levels` };
}

type KVMap = Record<string, unknown>;

export interface TracingConfig {
  /** The trace API (the platform's gateway), e.g. `http://127.0.0.1:8080`. */
  endpoint: string;
  /** Sent as X-Api-Key: a deployment's tracing credential, or (berth dev) the developer's API key. */
  apiKey: string;
  /** The tracing project runs are recorded in (created by the trace API on the first run). */
  project: string;
  delivery?: TraceDeliveryOptions;
}

export class RunTracing {
  private readonly client: Client;
  private readonly delivery: TraceDelivery;

  constructor(
    private readonly config: TracingConfig,
    log: Logger,
  ) {
    this.delivery = new TraceDelivery(log, config.delivery);
    this.client = new Client({
      apiUrl: config.endpoint,
      apiKey: config.apiKey,
      autoBatchTracing: true,
      // A root run's end must not wait for its batch to be sent.
      blockOnRootRunFinalization: false,
      fetchImplementation: this.delivery.fetch,
      // The Client holds runs only until its next batch (every 250 ms): TraceDelivery is the buffer.
      maxIngestMemoryBytes: config.delivery?.maxBufferedBytes ?? 16 * 1024 * 1024,
      hideInputs: traceable,
      hideOutputs: traceable,
      hideMetadata: traceable,
    });
  }

  /** Where traces go, for the server's start log. */
  get describe(): { endpoint: string; project: string } {
    return { endpoint: this.config.endpoint, project: this.config.project };
  }

  /** The callbacks one run executes with (a tracer keeps the runs of its trace while it lasts). */
  handlers(): BaseCallbackHandler[] {
    return [new LangChainTracer({ projectName: this.config.project, client: this.client })];
  }

  /**
   * Sends what the runs that ended have traced, for at most `timeoutMs` (the server stops): the
   * tracer's callbacks still queued, the Client's last batch, then the delivery buffer.
   */
  async close(timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    await Promise.race([awaitAllCallbacks().then(() => this.client.awaitPendingTraceBatches()), timeout]);
    clearTimeout(timer);
    await this.delivery.close(Math.max(0, deadline - Date.now()));
  }
}
