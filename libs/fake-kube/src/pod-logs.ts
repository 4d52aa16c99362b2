/** What the containers of fake pods "printed": served at `pods/{name}/log`, dropped with the pod. */
import type { ObjectStore } from './store.js';

export class PodLogs {
  readonly #logs = new Map<string, string>();
  readonly #unsubscribe: () => void;

  constructor(store: ObjectStore) {
    this.#unsubscribe = store.subscribe((event) => {
      if (event.type === 'DELETED' && event.resource.group === '' && event.resource.resource === 'pods') {
        this.#logs.delete(`${event.object.metadata.namespace}/${event.object.metadata.name}`);
      }
    });
  }

  set(namespace: string, pod: string, text: string): void {
    this.#logs.set(`${namespace}/${pod}`, text);
  }

  /** The log text (empty for a pod that printed nothing). */
  get(namespace: string, pod: string): string {
    return this.#logs.get(`${namespace}/${pod}`) ?? '';
  }

  close(): void {
    this.#unsubscribe();
  }
}
