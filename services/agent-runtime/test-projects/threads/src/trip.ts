/**
 * Subgraph state for the thread tests: parent `plan` → subgraph `booking` → parent `confirm`.
 * `booking` (state: `log`, `city`) runs `choose` (city "Paris" unless one is set) and stops before
 * `book` (compiled with interruptBefore), which logs `booked <city>`; `book` itself runs the
 * subgraph `payment` (`charge` logs `charged for <city>`). Only the subgraphs have `city`, so a
 * state update of `city` must reach the subgraph's checkpoint.
 */
import { Annotation, StateGraph } from '@langchain/langgraph';

const log = () => Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] });

const payment = new StateGraph(Annotation.Root({ log: log(), city: Annotation<string>, amount: Annotation<number> }))
  .addNode('charge', (state) => ({ log: [`charged for ${state.city}`] }))
  .addEdge('__start__', 'charge')
  .addEdge('charge', '__end__')
  .compile();

const booking = new StateGraph(Annotation.Root({ log: log(), city: Annotation<string> }))
  .addNode('choose', (state) => ({ city: state.city ?? 'Paris' }))
  .addNode('book', async (state) => ({ log: [`booked ${state.city}`, ...(await payment.invoke({ city: state.city })).log] }), { subgraphs: [payment] })
  .addEdge('__start__', 'choose')
  .addEdge('choose', 'book')
  .addEdge('book', '__end__')
  .compile({ interruptBefore: ['book'] });

// No reducer in the parent: the subgraph returns the whole log (it started from the parent's).
export const graph = new StateGraph(Annotation.Root({ log: Annotation<string[]> }))
  .addNode('plan', () => ({ log: ['planned'] }))
  .addNode('booking', booking)
  .addNode('confirm', (state) => ({ log: [...state.log, `confirmed after ${state.log.length} entries`] }))
  .addEdge('__start__', 'plan')
  .addEdge('plan', 'booking')
  .addEdge('booking', 'confirm')
  .addEdge('confirm', '__end__')
  .compile();
