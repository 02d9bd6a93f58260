/* A hostile stand-in for HotSpot's libjvm.so (issue 22): it exports the four introspection
 * tables and every companion symbol the profiler reads, filled by a local user to attack the
 * root profiler that reads them. Built by tests/tests/security_tables.rs with one of:
 *   -DHUGE_OFFSET   complete tables, but CodeBlob::_name at offset 2^40;
 *   -DHUGE_TABLES   four tables of 131,071 entries, each with a distinct 511-byte name;
 *   -DSEGMAP_ONES   complete tables, a code heap whose segment map is all 1s;
 *   -DUFFD_SEGMAP   complete tables, a code heap whose segment map is memory registered with
 *                   userfaultfd and never served: any read of it blocks (tests/tests/security_stall.rs).
 * fake_run() runs the calling thread in the fake code heap (a nop sled) for ever, so the
 * profiler samples pcs in it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifdef UFFD_SEGMAP
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Fresh memory whose first touch of each page waits for a userfaultfd handler that never
 * answers: a read of it by another process (process_vm_readv) blocks until this one ends. This
 * process never touches it. Needs vm.unprivileged_userfaultfd=1 when not root. */
static char *blocking_memory(size_t bytes) {
    int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
    if (uffd < 0) { perror("userfaultfd"); abort(); }
    struct uffdio_api api = {.api = UFFD_API};
    if (ioctl(uffd, UFFDIO_API, &api)) { perror("UFFDIO_API"); abort(); }
    char *mem = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) abort();
    struct uffdio_register reg = {.range = {.start = (unsigned long)mem, .len = bytes}, .mode = UFFDIO_REGISTER_MODE_MISSING};
    if (ioctl(uffd, UFFDIO_REGISTER, &reg)) { perror("UFFDIO_REGISTER"); abort(); }
    return mem; /* the descriptor stays open, never read */
}
#endif

typedef struct { const char *type_name, *field_name, *type_string; int32_t is_static; uint64_t offset; void *address; } StructEntry;
typedef struct { const char *type_name, *superclass_name; int32_t is_oop, is_integer, is_unsigned; uint64_t size; } TypeEntry;
typedef struct { const char *name; int32_t value; } IntEntry;
typedef struct { const char *name; uint64_t value; } LongEntry;

StructEntry *gHotSpotVMStructs;
uint64_t gHotSpotVMStructEntryArrayStride = sizeof(StructEntry);
uint64_t gHotSpotVMStructEntryTypeNameOffset = offsetof(StructEntry, type_name);
uint64_t gHotSpotVMStructEntryFieldNameOffset = offsetof(StructEntry, field_name);
uint64_t gHotSpotVMStructEntryTypeStringOffset = offsetof(StructEntry, type_string);
uint64_t gHotSpotVMStructEntryIsStaticOffset = offsetof(StructEntry, is_static);
uint64_t gHotSpotVMStructEntryOffsetOffset = offsetof(StructEntry, offset);
uint64_t gHotSpotVMStructEntryAddressOffset = offsetof(StructEntry, address);
TypeEntry *gHotSpotVMTypes;
uint64_t gHotSpotVMTypeEntryArrayStride = sizeof(TypeEntry);
uint64_t gHotSpotVMTypeEntryTypeNameOffset = offsetof(TypeEntry, type_name);
uint64_t gHotSpotVMTypeEntrySuperclassNameOffset = offsetof(TypeEntry, superclass_name);
uint64_t gHotSpotVMTypeEntryIsOopTypeOffset = offsetof(TypeEntry, is_oop);
uint64_t gHotSpotVMTypeEntryIsIntegerTypeOffset = offsetof(TypeEntry, is_integer);
uint64_t gHotSpotVMTypeEntryIsUnsignedOffset = offsetof(TypeEntry, is_unsigned);
uint64_t gHotSpotVMTypeEntrySizeOffset = offsetof(TypeEntry, size);
IntEntry *gHotSpotVMIntConstants;
uint64_t gHotSpotVMIntConstantEntryArrayStride = sizeof(IntEntry);
uint64_t gHotSpotVMIntConstantEntryNameOffset = offsetof(IntEntry, name);
uint64_t gHotSpotVMIntConstantEntryValueOffset = offsetof(IntEntry, value);
LongEntry *gHotSpotVMLongConstants;
uint64_t gHotSpotVMLongConstantEntryArrayStride = sizeof(LongEntry);
uint64_t gHotSpotVMLongConstantEntryNameOffset = offsetof(LongEntry, name);
uint64_t gHotSpotVMLongConstantEntryValueOffset = offsetof(LongEntry, value);

#define LOG2_SEGMENT 6
#define HEAP_BYTES (4u << 20)
#define SEGMENTS (HEAP_BYTES >> LOG2_SEGMENT)
#define SLED_BYTES (256u << 10)

__attribute__((used)) static int32_t vm_version[4] = {17, 0, 15, 1};
static struct { char *memory_low, *memory_high, *segmap_low, *segmap_high; int32_t log2_segment_size; } code_heap;
static void *heap_list[1];
static struct { int32_t len; int32_t pad; void **data; } heaps = {1, 0, heap_list};
__attribute__((used)) static void *heaps_ptr = &heaps;
static char interpreter_code[4096];
static struct { char *buffer; int32_t limit; } stub_queue = {interpreter_code, sizeof interpreter_code};
__attribute__((used)) static void *stub_queue_ptr = &stub_queue;
static unsigned char segmap[SEGMENTS];

#ifdef HUGE_OFFSET
#define BLOB_NAME_OFFSET (1ull << 40)
#else
#define BLOB_NAME_OFFSET 8
#endif

#ifndef HUGE_TABLES
static StructEntry structs[] = {
    {"Abstract_VM_Version", "_vm_major_version", "int", 1, 0, &vm_version[0]},
    {"Abstract_VM_Version", "_vm_minor_version", "int", 1, 0, &vm_version[1]},
    {"Abstract_VM_Version", "_vm_security_version", "int", 1, 0, &vm_version[2]},
    {"Abstract_VM_Version", "_vm_build_number", "int", 1, 0, &vm_version[3]},
    {"Method", "_constMethod", "ConstMethod*", 0, 8, 0},
    {"ConstMethod", "_constants", "ConstantPool*", 0, 8, 0},
    {"ConstMethod", "_code_size", "u2", 0, 16, 0},
    {"ConstMethod", "_name_index", "u2", 0, 18, 0},
    {"ConstMethod", "_signature_index", "u2", 0, 20, 0},
    {"ConstMethod", "_method_idnum", "u2", 0, 22, 0},
    {"ConstMethod", "_flags", "u2", 0, 24, 0},
    {"ConstantPool", "_pool_holder", "InstanceKlass*", 0, 24, 0},
    {"ConstantPool", "_length", "int", 0, 32, 0},
    {"Klass", "_name", "Symbol*", 0, 16, 0},
    {"InstanceKlass", "_methods", "Array<Method*>*", 0, 400, 0},
    {"Array<Method*>", "_length", "int", 0, 0, 0},
    {"Array<Method*>", "_data", "Method*", 0, 8, 0},
    {"Symbol", "_length", "u2", 0, 0, 0},
    {"Symbol", "_body", "u1", 0, 6, 0},
    {"CodeCache", "_heaps", "GrowableArray<CodeHeap*>*", 1, 0, &heaps_ptr},
    {"GrowableArrayBase", "_len", "int", 0, 0, 0},
    {"GrowableArray<int>", "_data", "int*", 0, 8, 0},
    {"CodeHeap", "_memory", "VirtualSpace", 0, 0, 0},
    {"CodeHeap", "_segmap", "VirtualSpace", 0, 16, 0},
    {"CodeHeap", "_log2_segment_size", "int", 0, 32, 0},
    {"VirtualSpace", "_low", "char*", 0, 0, 0},
    {"VirtualSpace", "_high", "char*", 0, 8, 0},
    {"HeapBlock", "_header", "HeapBlock::Header", 0, 0, 0},
    {"HeapBlock::Header", "_length", "size_t", 0, 0, 0},
    {"HeapBlock::Header", "_used", "bool", 0, 8, 0},
    {"CodeBlob", "_name", "const char*", 0, BLOB_NAME_OFFSET, 0},
    {"CodeBlob", "_size", "int", 0, 16, 0},
    {"CodeBlob", "_code_begin", "address", 0, 24, 0},
    {"CodeBlob", "_frame_size", "int", 0, 32, 0},
    {"CodeBlob", "_frame_complete_offset", "int", 0, 36, 0},
    {"nmethod", "_method", "Method*", 0, 40, 0},
    {"nmethod", "_compile_id", "int", 0, 48, 0},
    {"AbstractInterpreter", "_code", "StubQueue*", 1, 0, &stub_queue_ptr},
    {"StubQueue", "_stub_buffer", "address", 0, 0, 0},
    {"StubQueue", "_buffer_limit", "int", 0, 8, 0},
    {0, 0, 0, 0, 0, 0},
};
static TypeEntry types[] = {
    {"ConstMethod", 0, 0, 0, 0, 48},
    {"ConstantPool", 0, 0, 0, 0, 80},
    {"HeapBlock", 0, 0, 0, 0, 16},
    {"CodeBlob", 0, 0, 0, 0, 56},
    {"nmethod", "CodeBlob", 0, 0, 0, 256},
    {0, 0, 0, 0, 0, 0},
};
static IntEntry ints[] = {{0, 0}};
static LongEntry longs[] = {{0, 0}};
#endif

static char *sled;

#ifdef HUGE_TABLES
#define HUGE_ENTRIES 131071
#define NAME_BYTES 511
/* A distinct NAME_BYTES-long name, the entry's number in its last digits. */
static char *distinct_name(char *at, int table, int i) {
    memset(at, 'a' + table, NAME_BYTES);
    for (int d = 0, v = i; d < 8; d++, v /= 10) at[NAME_BYTES - 1 - d] = '0' + v % 10;
    at[NAME_BYTES] = 0;
    return at;
}

static void build_huge_tables(void) {
    char *names = malloc((size_t)4 * HUGE_ENTRIES * (NAME_BYTES + 1));
    StructEntry *s = calloc(HUGE_ENTRIES + 1, sizeof *s);
    TypeEntry *t = calloc(HUGE_ENTRIES + 1, sizeof *t);
    IntEntry *in = calloc(HUGE_ENTRIES + 1, sizeof *in);
    LongEntry *l = calloc(HUGE_ENTRIES + 1, sizeof *l);
    for (int i = 0; i < HUGE_ENTRIES; i++) {
        char *n = names + (size_t)4 * i * (NAME_BYTES + 1);
        t[i].type_name = distinct_name(n, 0, i);
        t[i].size = 8;
        s[i] = (StructEntry){distinct_name(n + (NAME_BYTES + 1), 1, i), "_f", "int", 0, 8, 0};
        in[i] = (IntEntry){distinct_name(n + 2 * (NAME_BYTES + 1), 2, i), i};
        l[i] = (LongEntry){distinct_name(n + 3 * (NAME_BYTES + 1), 3, i), i};
    }
    gHotSpotVMStructs = s;
    gHotSpotVMTypes = t;
    gHotSpotVMIntConstants = in;
    gHotSpotVMLongConstants = l;
}
#endif

void fake_setup(void) {
#ifdef HUGE_TABLES
    build_huge_tables();
#else
    gHotSpotVMStructs = structs;
    gHotSpotVMTypes = types;
    gHotSpotVMIntConstants = ints;
    gHotSpotVMLongConstants = longs;
#endif
    char *heap = mmap(0, HEAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (heap == MAP_FAILED) abort();
    /* One used block over the whole heap: a HeapBlock header, then an "nmethod" blob. */
    *(uint64_t *)heap = SEGMENTS;
    heap[8] = 1;
    char *blob = heap + 16;
    *(const char **)(blob + 8) = "nmethod";
    *(int32_t *)(blob + 16) = HEAP_BYTES - 16;
    *(char **)(blob + 24) = heap + 64;
    *(int32_t *)(blob + 32) = 2;
    sled = heap + HEAP_BYTES - SLED_BYTES;
    memset(sled, 0x90, SLED_BYTES); /* nop */
    /* jmp rel32 from the sled's end back to its start */
    char *jmp = sled + SLED_BYTES - 5;
    jmp[0] = (char)0xe9;
    *(int32_t *)(jmp + 1) = (int32_t)(sled - (jmp + 5));
    for (unsigned i = 0; i < SEGMENTS; i++) {
#ifdef SEGMAP_ONES
        segmap[i] = 1;
#else
        segmap[i] = i < 255 ? i : 254; /* back to the block start in hops of 254 */
#endif
    }
    if (mprotect(heap, HEAP_BYTES, PROT_READ | PROT_EXEC)) abort();
    code_heap.memory_low = heap;
    code_heap.memory_high = heap + HEAP_BYTES;
#ifdef UFFD_SEGMAP
    code_heap.segmap_low = blocking_memory(SEGMENTS);
#else
    code_heap.segmap_low = (char *)segmap;
#endif
    code_heap.segmap_high = code_heap.segmap_low + SEGMENTS;
    code_heap.log2_segment_size = LOG2_SEGMENT;
    heap_list[0] = &code_heap;
}

void fake_run(void) {
#ifdef HUGE_TABLES
    for (;;) __asm__ volatile("");
#else
    ((void (*)(void))sled)();
#endif
}
