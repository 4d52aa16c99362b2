/**
 * Returns a value Postgres or JSON finds hard, chosen by the input's `kind` (see OUTPUTS): the
 * node writes it to the state's `value` channel. `throw_nul` throws an error whose message holds
 * U+0000. The graph-output tests check that each run ends with a clear status and that what can
 * be stored reads back exactly.
 */
import { Annotation, StateGraph } from '@langchain/langgraph';

/** Depth at which JSON.stringify (and the checkpoint serializer) run out of stack. */
const TOO_DEEP = 100_000;

function nested(depth: number): unknown {
  const root: Record<string, unknown> = {};
  let node = root;
  for (let i = 1; i < depth; i++) {
    const child: Record<string, unknown> = {};
    node.d = child;
    node = child;
  }
  node.leaf = 'bottom';
  return root;
}

function circular(): unknown {
  const value: Record<string, unknown> = { name: 'loop' };
  value.self = value;
  return value;
}

/** What each kind returns. Strings hold U+0000, lone surrogates and U+FDD0 (the storage escape). */
export const OUTPUTS: Record<string, () => unknown> = {
  nul: () => ({ text: 'a\u0000b', ['key\u0000']: ['\u0000', '\u0000\u0000'], literal: '\\u0000' }),
  surrogates: () => ({ high: '\ud800', low: 'x\udc00y', reversed: '\udc00\ud800', pair: '\ud83d\ude00' }),
  escape: () => ({ mark: '\ufdd0', marked: 'a\ufdd00b', both: '\ufdd0\u0000\ufdd0m', ['\ufdd0u']: '\ufdd0ud800' }),
  big: () => ({ blob: 'x'.repeat(50 * 1024 * 1024) }),
  deep: () => nested(TOO_DEEP),
  nested: () => nested(500),
  bigint: () => ({ count: 10n }),
  circular,
};

const State = Annotation.Root({
  kind: Annotation<string>,
  value: Annotation<unknown>,
});

function produce(state: typeof State.State) {
  if (state.kind === 'throw_nul') throw new Error('bad\u0000message');
  const make = OUTPUTS[state.kind];
  if (!make) throw new Error(`unknown kind ${state.kind}`);
  return { value: make() };
}

export const graph = new StateGraph(State).addNode('produce', produce).addEdge('__start__', 'produce').addEdge('produce', '__end__').compile();
