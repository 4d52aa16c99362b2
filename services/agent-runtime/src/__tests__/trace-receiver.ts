/**
 * A trace API stand-in for the agent server's tracing tests: answers /info and takes the
 * `langsmith` Client's multipart batches, keeping each run's latest fields. As the platform's trace
 * store does, it cleans strings (keys too) with U+0000 or a lone surrogate and refuses (keeps out,
 * and lists in `refused`) a part it still cannot store: one nested too deep.
 */
import express from 'express';
import { listen, storableStrings, unsafeValueIssues, type RunningServer } from '@berth/http';
import { until } from '@berth/testing';

export type TracedRun = Record<string, any> & { id: string };

export class TraceReceiver {
  readonly runs = new Map<string, TracedRun>();
  readonly apiKeys = new Set<string>();
  /** How many times each run id was created (a `post.` part), in arrival order. */
  readonly posts: string[] = [];
  /** Ids of the runs whose parts were refused. */
  readonly refused: string[] = [];
  private server?: RunningServer;

  async start(): Promise<string> {
    const app = express();
    app.get('/info', (_req, res) => void res.json({ version: 'test' }));
    app.post('/runs/multipart', express.raw({ type: () => true, limit: '200mb' }), async (req, res) => {
      this.apiKeys.add(String(req.headers['x-api-key']));
      const form = await new Response(req.body as Buffer, { headers: { 'content-type': String(req.headers['content-type']) } }).formData();
      for (const [name, value] of form.entries()) {
        const [, op, id, field] = /^(post|patch)\.([^.]+)(?:\.(.+))?$/.exec(name) ?? [];
        if (!id) continue;
        const json = storableStrings(JSON.parse(typeof value === 'string' ? value : await value.text())) as Record<string, unknown>;
        if (unsafeValueIssues('body', json).length > 0) {
          this.refused.push(id);
          continue;
        }
        if (op === 'post' && !field) this.posts.push(id);
        const run = this.runs.get(id) ?? { id };
        this.runs.set(id, field ? { ...run, [field]: json } : { ...run, ...json });
      }
      res.status(202).json({});
    });
    this.server = await listen(app, '127.0.0.1', 0);
    return this.server.url;
  }

  close(): Promise<void> {
    return this.server?.close() ?? Promise.resolve();
  }

  /** Root runs (of any trace) recorded for the agent-server run `runId` (its `metadata.run_id`). */
  roots(runId: string): TracedRun[] {
    return [...this.runs.values()].filter((r) => r.extra?.metadata?.run_id === runId && !r.parent_run_id);
  }

  /** The runs of the trace whose root is the run with `metadata.run_id` = `runId`, once it ended. */
  async trace(runId: string): Promise<TracedRun[]> {
    const ended = () => this.roots(runId).find((r) => r.end_time);
    const root = await until(`the trace of run ${runId}`, ended, 15_000);
    const runs = [...this.runs.values()].filter((r) => r.trace_id === root.id);
    // Children end before their parent; wait until every run of the trace has ended too.
    await until('every run of the trace to end', () => (runs.every((r) => this.runs.get(r.id)?.end_time) ? true : undefined), 5000);
    return runs.map((r) => this.runs.get(r.id)!);
  }
}
