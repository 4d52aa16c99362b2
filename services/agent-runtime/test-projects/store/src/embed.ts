/**
 * A deterministic toy embedding (no model, no network): how often each of eight topic words
 * occurs in the text. Texts about the same words point the same way, so cosine similarity ranks
 * them predictably in tests.
 */
const VOCABULARY = ['cat', 'dog', 'fish', 'bird', 'car', 'tree', 'food', 'music'];

export function embed(texts: string[]): number[][] {
  return texts.map((text) => {
    const lower = text.toLowerCase();
    // A small constant keeps texts without topic words away from the zero vector.
    return VOCABULARY.map((word) => lower.split(word).length - 1 + 0.01);
  });
}

/** Returns vectors of the wrong size: the server must refuse the put, not store them. */
export function badEmbed(texts: string[]): number[][] {
  return texts.map(() => [1, 2]);
}
