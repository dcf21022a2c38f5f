package odfd.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.shuffle.sort.SortShuffleManager;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;

import scala.Product2;
import scala.Tuple2;
import scala.Tuple3;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.collection.Seq;

/**
 * Spark's sort-based shuffle, except that a reduce task reads its records in a fixed order:
 * reduce partition by reduce partition, and within one, map output by map output in map index
 * order, each map output's records in the order the map task wrote them.
 *
 * <p>Spark's own reader fetches remote map outputs concurrently, in random order, and hands
 * records on as blocks arrive, so on a cluster the order in which an aggregation or a join sees
 * its input (and so the order of its output, and the last bits of floating-point sums) changes
 * from run to run. odfd must reproduce a transform's output bit for bit, whatever master runs it,
 * so it reads one map output after the other. In local mode this is the order Spark already uses.
 *
 * <p>Shuffles of the RDD API that aggregate or sort on the reduce side are left to Spark's reader:
 * they combine records across map outputs, which reading map outputs one by one would break.
 */
public final class MapOrderShuffleManager extends SortShuffleManager {

    public MapOrderShuffleManager(SparkConf conf) {
        super(conf);
    }

    @Override
    public <K, C> ShuffleReader<K, C> getReader(
            ShuffleHandle handle,
            int startMapIndex,
            int endMapIndex,
            int startPartition,
            int endPartition,
            TaskContext context,
            ShuffleReadMetricsReporter metrics) {
        @SuppressWarnings("unchecked")
        ShuffleDependency<K, ?, C> dependency = ((BaseShuffleHandle<K, ?, C>) handle).dependency();
        if (dependency.aggregator().isDefined() || dependency.keyOrdering().isDefined()) {
            return super.getReader(handle, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics);
        }
        List<long[]> pieces = piecesInOrder(handle.shuffleId(), startMapIndex, endMapIndex, startPartition, endPartition);
        return () -> new Concatenation<>(pieces, piece -> super.<K, C>getReader(
                handle, (int) piece[1], (int) piece[1] + 1, (int) piece[0], (int) piece[0] + 1, context, metrics).read());
    }

    /** The non-empty (reduce partition, map index) pairs of the range, in reading order. */
    private static List<long[]> piecesInOrder(int shuffleId, int startMapIndex, int endMapIndex,
                                              int startPartition, int endPartition) {
        TreeSet<Long> keys = new TreeSet<>();
        Iterator<Tuple2<BlockManagerId, Seq<Tuple3<BlockId, Object, Object>>>> locations =
                SparkEnv.get().mapOutputTracker().getMapSizesByExecutorId(
                        shuffleId, startMapIndex, endMapIndex, startPartition, endPartition);
        while (locations.hasNext()) {
            Iterator<Tuple3<BlockId, Object, Object>> blocks = locations.next()._2().iterator();
            while (blocks.hasNext()) {
                Tuple3<BlockId, Object, Object> block = blocks.next();
                int mapIndex = (Integer) block._3();
                if (block._1() instanceof ShuffleBlockId shuffleBlock) {
                    keys.add(((long) shuffleBlock.reduceId() << 32) | mapIndex);
                } else {
                    for (int partition = startPartition; partition < endPartition; partition++) {
                        keys.add(((long) partition << 32) | mapIndex);
                    }
                }
            }
        }
        List<long[]> pieces = new ArrayList<>(keys.size());
        for (long key : keys) {
            pieces.add(new long[] {key >>> 32, key & 0xffffffffL});
        }
        return pieces;
    }

    /** Reads the pieces one after the other, opening each only when the previous one is done. */
    private static final class Concatenation<K, C> extends AbstractIterator<Product2<K, C>> {
        interface Opener<K, C> {
            Iterator<Product2<K, C>> open(long[] piece);
        }

        private final List<long[]> pieces;
        private final Opener<K, C> opener;
        private int next = 0;
        private Iterator<Product2<K, C>> current = null;

        Concatenation(List<long[]> pieces, Opener<K, C> opener) {
            this.pieces = pieces;
            this.opener = opener;
        }

        @Override
        public boolean hasNext() {
            while (current == null || !current.hasNext()) {
                if (next >= pieces.size()) {
                    return false;
                }
                current = opener.open(pieces.get(next++));
            }
            return true;
        }

        @Override
        public Product2<K, C> next() {
            if (!hasNext()) {
                throw new java.util.NoSuchElementException("no more shuffle records");
            }
            return current.next();
        }
    }
}
