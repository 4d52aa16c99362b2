/** A write through the SDK after which every answer under `queryKey` is read again (lists, the open entry). */
import { useMutation, useQueryClient, type QueryKey } from '@tanstack/react-query';

export function useWrite<T>(queryKey: QueryKey, write: (input: T) => Promise<unknown>, then?: (input: T) => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: write,
    onSuccess: async (_, input) => {
      await queryClient.invalidateQueries({ queryKey });
      then?.(input);
    },
  });
}
