/* Prints docs/architecture.md's table of the test hooks as util/test_hooks.h declares them,
 * or checks that the docs carry it (doc_block.h):
 *   hooks_doc              print the generated block
 *   hooks_doc --check MD   exit 1 unless MD holds it between the test-hooks markers
 *   hooks_doc --write MD   replace the block in MD */
#include "doc_block.h"
#include "util/test_hooks.h"

int main(int argc, char **argv) {
    return doc_block_main(argc, argv, "test-hooks", "hooks_doc", test_hooks_markdown);
}
