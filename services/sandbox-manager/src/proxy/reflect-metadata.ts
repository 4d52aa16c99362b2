/**
 * The part of the Reflect metadata API that `@peculiar/x509` needs (through tsyringe, which refuses
 * to load without it): its classes are registered with `injectable()`, which reads constructor
 * parameter types — none here, as nothing emits decorator metadata. Imported before
 * `@peculiar/x509`; it leaves a real polyfill alone if one is loaded.
 */
type MetadataReflect = typeof Reflect & {
  getMetadata?: (key: unknown, target: object) => unknown;
  getOwnMetadata?: (key: unknown, target: object) => unknown;
  defineMetadata?: (key: unknown, value: unknown, target: object) => void;
};

const reflect = Reflect as MetadataReflect;
if (!reflect.getMetadata) {
  const store = new WeakMap<object, Map<unknown, unknown>>();
  reflect.defineMetadata = (key, value, target) => {
    const own = store.get(target) ?? new Map<unknown, unknown>();
    own.set(key, value);
    store.set(target, own);
  };
  reflect.getOwnMetadata = (key, target) => store.get(target)?.get(key);
  reflect.getMetadata = (key, target) => {
    for (let current: object | null = target; current; current = Object.getPrototypeOf(current) as object | null) {
      const own = store.get(current);
      if (own?.has(key)) return own.get(key);
    }
    return undefined;
  };
}

export {};
