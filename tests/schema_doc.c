/* Prints the column tables of docs/hdf5-schema.md as the view writes them (generated from
 * the event and knob declarations), or checks that the docs carry them (doc_block.h):
 *   schema_doc              print the generated block
 *   schema_doc --check MD   exit 1 unless MD holds it between the schema markers
 *   schema_doc --write MD   replace the block in MD */
#include "doc_block.h"
#include "orchestrator/record/h5view.h"

int main(int argc, char **argv) {
    return doc_block_main(argc, argv, "schema", "schema_doc", h5view_schema_markdown);
}
