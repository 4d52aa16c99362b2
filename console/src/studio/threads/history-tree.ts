/**
 * A thread's checkpoints (its history, newest first, as the agent server pages it) as a tree: each
 * checkpoint's children are the checkpoints written from it. One child is the thread going on;
 * several are a fork (a re-run from that checkpoint, or a state edit at it), each child a branch.
 * The head is the newest checkpoint, the one the thread's state is; its ancestors are the current branch.
 */
import type { ThreadState } from '@langchain/langgraph-sdk';

export interface Timeline {
  /** Checkpoints by id. */
  byId: Map<string, ThreadState>;
  /** The checkpoints written from each checkpoint, oldest first. */
  children: Map<string, string[]>;
  /** The oldest loaded checkpoints: those without a parent, or whose parent is on a page not loaded yet. */
  roots: string[];
  /** The thread's latest checkpoint (what `getState` reads). */
  head: string | undefined;
  /** The head and its ancestors. */
  current: Set<string>;
}

export const checkpointId = (state: ThreadState): string => state.checkpoint.checkpoint_id ?? '';
const parentId = (state: ThreadState): string | undefined => state.parent_checkpoint?.checkpoint_id ?? undefined;

/**
 * The tree of `states` (newest first, as the history answers). Checkpoint ids are time-ordered
 * (uuid6), so sorting them puts siblings in the order they were written.
 */
export function buildTimeline(states: ThreadState[]): Timeline {
  const byId = new Map(states.map((s) => [checkpointId(s), s]));
  const children = new Map<string, string[]>();
  const roots: string[] = [];
  for (const state of states) {
    const parent = parentId(state);
    if (parent !== undefined && byId.has(parent)) children.set(parent, [...(children.get(parent) ?? []), checkpointId(state)]);
    else roots.push(checkpointId(state));
  }
  for (const list of children.values()) list.sort();
  roots.sort();
  const head = states[0] ? checkpointId(states[0]) : undefined;
  const current = new Set<string>();
  for (let at = head; at !== undefined && byId.has(at); at = parentId(byId.get(at)!)) current.add(at);
  return { byId, children, roots, head, current };
}

/**
 * A chain of checkpoints from `start` while each has one child, and the children of the last one
 * when there are several (the fork that ends the chain).
 */
export function chainFrom(timeline: Timeline, start: string): { chain: string[]; forks: string[] } {
  const chain = [start];
  for (;;) {
    const next = timeline.children.get(chain.at(-1)!) ?? [];
    if (next.length !== 1) return { chain, forks: next };
    chain.push(next[0]!);
  }
}

/**
 * What wrote a checkpoint, in words: the nodes of its step (`metadata.writes` when the graph records
 * it, else what its parent had next), a state edit, a run's input, or the copy a re-run starts from.
 */
export function writtenBy(timeline: Timeline, state: ThreadState): string {
  const metadata = state.metadata ?? {};
  const writes = metadata.writes && typeof metadata.writes === 'object' ? Object.keys(metadata.writes) : [];
  const parent = timeline.byId.get(parentId(state) ?? '');
  switch (metadata.source) {
    case 'input':
      return 'input';
    case 'update':
      return writes.length > 0 ? `state edited as ${writes.join(', ')}` : 'state edited';
    case 'fork':
      return 'copied to re-run';
    default: {
      const nodes = writes.length > 0 ? writes : (parent?.next ?? []);
      return nodes.length > 0 ? `ran ${nodes.join(', ')}` : String(metadata.source ?? 'unknown');
    }
  }
}

/** Every node named in the loaded history (what a state edit can be written as). */
export function nodeNames(timeline: Timeline): string[] {
  const names = new Set<string>();
  for (const state of timeline.byId.values()) {
    for (const node of state.next) names.add(node);
    if (state.metadata?.writes && typeof state.metadata.writes === 'object') for (const node of Object.keys(state.metadata.writes)) names.add(node);
  }
  names.delete('__start__');
  return [...names].sort();
}

/**
 * The keys of `edited` whose value differs from `before`'s: only those are sent, so a key with a
 * reducer (a list that appends) is not written again with what it holds already.
 */
export function changedValues(before: unknown, edited: Record<string, unknown>): Record<string, unknown> {
  const old = before && typeof before === 'object' && !Array.isArray(before) ? (before as Record<string, unknown>) : {};
  return Object.fromEntries(Object.entries(edited).filter(([key, value]) => JSON.stringify(value) !== JSON.stringify(old[key])));
}
