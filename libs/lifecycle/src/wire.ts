/**
 * States on the wire between services: a protobuf enum whose value names are the states (after
 * the enum's prefix, as protoc-gen-es names TypeScript enum members), with value 0, `UNSPECIFIED`,
 * meaning "no state". REST keeps the state names as text; gRPC carries the enum numbers.
 */
import type { Lifecycle } from './lifecycle.js';

/** A protobuf enum as protoc-gen-es generates it: a TypeScript numeric enum (names to numbers and back). */
export type ProtoEnum = Record<string, string | number>;

/** The name of every protobuf enum's zero value, which names no state. */
const UNSPECIFIED = 'UNSPECIFIED';

/** Maps states to a protobuf enum's numbers and back. */
export interface WireEnum<S extends string> {
  /** Every state the enum names, in the enum's order (`UNSPECIFIED` excluded). */
  readonly states: readonly S[];
  /** The enum number of a state. */
  encode(state: S): number;
  /** The state an enum number names; undefined for `UNSPECIFIED` or a number this build does not know. */
  decode(value: number): S | undefined;
  /** Whether a text is one of the states (as REST spells them). */
  isState(text: string): text is S;
}

type EnumNames<E extends ProtoEnum> = Exclude<keyof E & string, typeof UNSPECIFIED>;

/** The states a protobuf enum names, as they are: for a service that only relays them (e.g. a gateway mapping them to REST). */
export function wireEnum<E extends ProtoEnum>(protoEnum: E): WireEnum<EnumNames<E>>;
/**
 * A lifecycle's states on the wire. Throws when the enum and the lifecycle do not name the same
 * states, so a state added to one and not the other fails at start (and in tests), not on a call.
 */
export function wireEnum<S extends string>(protoEnum: ProtoEnum, states: Lifecycle<S> | readonly S[]): WireEnum<S>;
export function wireEnum(protoEnum: ProtoEnum, states?: Lifecycle<string> | readonly string[]): WireEnum<string> {
  const numbers = new Map<string, number>();
  for (const [name, value] of Object.entries(protoEnum)) {
    if (typeof value === 'number' && name !== UNSPECIFIED) numbers.set(name, value);
  }
  const names = new Map([...numbers].map(([name, value]) => [value, name]));
  const wanted = states === undefined ? [...numbers.keys()] : Array.isArray(states) ? states : (states as Lifecycle<string>).states;
  if (states !== undefined) {
    const missing = wanted.filter((s) => !numbers.has(s));
    const extra = [...numbers.keys()].filter((n) => !wanted.includes(n));
    if (missing.length || extra.length) {
      throw new Error(
        `the protobuf enum does not match the states${missing.length ? `; no enum value for ${missing.join(', ')}` : ''}${extra.length ? `; enum values that are no state: ${extra.join(', ')}` : ''}`,
      );
    }
  }
  const known = new Set(wanted);
  return {
    states: [...numbers.keys()],
    encode: (state) => {
      const value = numbers.get(state);
      if (value === undefined) throw new Error(`${state} has no protobuf enum value`);
      return value;
    },
    decode: (value) => names.get(value),
    isState: (text): text is string => known.has(text),
  };
}
