/** Studio, loaded when first shown: its chunk (the SDK, dagre) is not part of the console's first load. */
import { lazy, Suspense } from 'react';
import type { StudioProps } from './studio';

const Studio = lazy(() => import('./studio'));

export function LazyStudio(props: StudioProps) {
  return (
    <Suspense fallback={<p>Loading Studio…</p>}>
      <Studio {...props} />
    </Suspense>
  );
}
