/**
 * One entity's lifecycle, declared as one table: its states and, for each, the states it may move
 * to. Everything else — which states may lead to a state, which are terminal, whether a move is
 * legal — is derived from that table, so the store that performs status changes, the pipeline that
 * asks for them and the docs cannot disagree.
 *
 * @example
 * ```ts
 * const exportLifecycle = defineLifecycle('export', {
 *   PENDING: { initial: true, to: ['RUNNING', 'CANCELLED'] },
 *   RUNNING: { to: ['RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED'] },
 *   SUCCEEDED: {},
 *   FAILED: { failed: true },
 *   CANCELLED: {},
 * });
 * exportLifecycle.sourcesOf('CANCELLED'); // ['PENDING', 'RUNNING']
 * ```
 */
import { ConflictError } from '@berth/errors';

/** How one state is declared in a lifecycle table. */
export interface StateSpec<S extends string> {
  /**
   * The states an entity in this state may move to. A state may name itself: a step that is
   * resumed (e.g. a job run again after a restart) moves into the state it is already in.
   * A state without moves is terminal.
   */
  readonly to?: readonly S[];
  /** An entity may be created in this state. */
  readonly initial?: boolean;
  /** Reaching this state means the entity failed (what a user is told about, what alerts count). */
  readonly failed?: boolean;
}

/** A lifecycle table: every state, each with its allowed moves. Declaration order is the order states are listed in. */
export type LifecycleTable<S extends string> = { readonly [K in S]: StateSpec<NoInfer<S>> };

/**
 * A status change that the lifecycle does not allow: the entity is in a state from which `to`
 * cannot be reached (it moved on meanwhile, e.g. was interrupted, or the caller asked for a move
 * the table does not have), or it cannot be created in `to`. A conflict with the entity's current
 * state, so an API answers it 409 (gRPC FAILED_PRECONDITION), never 500.
 */
export class IllegalTransitionError extends ConflictError {
  /** The entity kind, e.g. `revision`. */
  readonly entity: string;
  /** Which entity, when one was named. */
  readonly id: string | undefined;
  /** Its state when the move was refused; undefined when it was being created. */
  readonly from: string | undefined;
  readonly to: string;

  constructor(details: { entity: string; id?: string; from?: string; to: string }, options?: { cause?: unknown }) {
    const which = details.id ? `${details.entity} ${details.id}` : `a new ${details.entity}`;
    super(details.from === undefined ? `${which} cannot start as ${details.to}` : `${which} is ${details.from}: it cannot move to ${details.to}`, options);
    this.entity = details.entity;
    this.id = details.id;
    this.from = details.from;
    this.to = details.to;
  }
}

/** A lifecycle table checked and indexed; build one with {@link defineLifecycle}. */
export class Lifecycle<S extends string> {
  /** Every state, in declaration order. */
  readonly states: readonly S[];
  /** States an entity may be created in. */
  readonly initial: readonly S[];
  /** States with no moves: nothing happens to the entity any more. */
  readonly terminal: readonly S[];
  /** States that mean the entity failed. */
  readonly failed: readonly S[];
  /** States that are not terminal: the entity is still on its way. */
  readonly unfinished: readonly S[];

  readonly #targets: ReadonlyMap<S, readonly S[]>;
  readonly #sources: ReadonlyMap<S, readonly S[]>;

  /**
   * @param entity what has this lifecycle, for messages (`revision`, `export run`).
   * @throws Error when the table names a state it does not declare, or declares no initial state.
   */
  constructor(
    readonly entity: string,
    table: LifecycleTable<S>,
  ) {
    const states = Object.keys(table) as S[];
    const declared = new Set<string>(states);
    const targets = new Map<S, readonly S[]>();
    const sources = new Map<S, S[]>(states.map((s) => [s, []]));
    for (const state of states) {
      const spec: StateSpec<S> = table[state];
      const to = [...new Set(spec.to ?? [])];
      for (const target of to) {
        if (!declared.has(target)) throw new Error(`lifecycle of ${entity}: ${state} moves to ${target}, which is not a declared state`);
        sources.get(target)!.push(state);
      }
      targets.set(state, to);
    }
    this.states = states;
    this.#targets = targets;
    this.#sources = sources;
    this.initial = states.filter((s) => table[s].initial === true);
    if (!this.initial.length) throw new Error(`lifecycle of ${entity}: no state is initial`);
    this.terminal = states.filter((s) => targets.get(s)!.length === 0);
    this.unfinished = states.filter((s) => targets.get(s)!.length > 0);
    this.failed = states.filter((s) => table[s].failed === true);
  }

  /** Whether `value` is one of the states (e.g. text read from a database or a request). */
  isState(value: unknown): value is S {
    return typeof value === 'string' && this.#targets.has(value as S);
  }

  /** Whether an entity in `from` may move to `to`. */
  canMove(from: S, to: S): boolean {
    return this.#targets.get(from)?.includes(to) ?? false;
  }

  /** The states that may move to `to` (what a conditional update requires the current state to be). */
  sourcesOf(to: S): readonly S[] {
    return this.#sources.get(to) ?? [];
  }

  /** The states an entity in `from` may move to. */
  targetsOf(from: S): readonly S[] {
    return this.#targets.get(from) ?? [];
  }

  isTerminal(state: S): boolean {
    return this.terminal.includes(state);
  }

  isFailed(state: S): boolean {
    return this.failed.includes(state);
  }

  /** Throws {@link IllegalTransitionError} unless an entity in `from` may move to `to`. */
  assertMove(from: S, to: S, id?: string): void {
    if (!this.canMove(from, to)) throw new IllegalTransitionError({ entity: this.entity, ...(id ? { id } : {}), from, to });
  }

  /** Throws {@link IllegalTransitionError} unless an entity may be created in `state`. */
  assertInitial(state: S, id?: string): void {
    if (!this.initial.includes(state)) throw new IllegalTransitionError({ entity: this.entity, ...(id ? { id } : {}), to: state });
  }
}

/**
 * Declares a lifecycle. The state type is inferred from the table's keys, and every `to` must name
 * one of them (checked by the compiler, and again at run time).
 */
export function defineLifecycle<S extends string>(entity: string, table: LifecycleTable<S>): Lifecycle<S> {
  return new Lifecycle(entity, table);
}
